"""Renderers, named by what they render: terminal text (`terminal`), the report document as Markdown
and HTML (`document`), figures (`plots`)."""

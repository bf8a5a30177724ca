"""Renderers, named by what they render: terminal text (`terminal`); the report document's blocks
(`document`) as Markdown (`markdown`) and HTML (`html`), written by `report_files`; figures (`plots`);
and how a value or number is spelled in all of them (`values`)."""

"""Fuzzing the checkpoint and log readers as ``reprobox hash`` meets them: hostile files, bounded.

Each target is one reader family. Seeds are written by the real libraries (``seeds``), mutated with
knowledge of each format's framing (``mutate``), and each input is hashed in a forked child held to a
time and memory limit (``forkserver``). An input passes when it is read, refused with a note, or refused
with a UsageError (``reprobox hash`` exits 2); anything else is a finding, kept under ``regressions/``.
"""

"""Forensics beyond one verdict: which difference between two machines changes a job's result."""

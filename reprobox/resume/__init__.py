"""Long runs: exact resume (`verify --resume-at`) and segment spot-checks (`spot-check`, `reproduce
--segments`). `pattern` says which outputs are resumable checkpoints; it stays light, the job file's
validator imports it."""

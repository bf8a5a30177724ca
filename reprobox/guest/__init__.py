"""The guest: what runs inside the container (or the local subprocess) around the user's command.

`python -m reprobox.guest -- COMMAND...` sets the deterministic environment, runs the command with a
startup hook that seeds every Python process, then hashes the checkpoints and records a fingerprint.
Nothing here imports the docker SDK; torch and numpy are imported only when the job uses them.
"""

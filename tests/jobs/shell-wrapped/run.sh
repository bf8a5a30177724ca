#!/usr/bin/env bash
# Two separate Python processes started from a shell; each must be seeded by the startup hook.
set -e
python draw.py first
python draw.py second

#!/bin/sh
# Runs once inside the freshly debootstrapped root filesystem (chroot), before it
# becomes both the bwrap root and the base of the Docker image. Everything that
# must be identical in the two backends happens here, not in the Dockerfile.
set -eu

# The unprivileged user every sandboxed command runs as (uid/gid 1000 in both backends).
groupadd --gid 1000 agent
useradd --uid 1000 --gid 1000 --home-dir /home/agent --shell /bin/bash --no-create-home agent
mkdir -p /workspace /home/agent
chown 1000:1000 /workspace /home/agent

# git refuses repositories owned by "someone else" (the workspace is a bind mount
# whose owner differs between backends); the sandbox only ever holds one repository.
git config --system safe.directory '*'
git config --system user.name agent
git config --system user.email agent@sandbox.invalid
git config --system init.defaultBranch main

# Smaller, reproducible: no package caches or lists (the sandbox has no network anyway).
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/* /tmp/* 2>/dev/null || true

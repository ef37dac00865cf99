"""Verified, resumable delivery of a pinned Hugging Face model revision to S3.

A sync uploads every file of one revision under one S3 prefix, verifies each upload against the
local SHA-256 (S3's composite checksum for multipart objects, a read-back for single PUTs), and
writes `_MANIFEST.json` last with a conditional write. A stop (SIGTERM) is a flag: no request after
it but aborts, never a publish. Readers treat a prefix without a valid manifest as absent, and the
serving gate (mounted_check.py) checks every published file's SHA-256 before a predictor serves it.
"""

MANIFEST_NAME = "_MANIFEST.json"

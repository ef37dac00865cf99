"""Verified, resumable delivery of a pinned Hugging Face model revision to S3.

A sync uploads every file of one revision under one S3 prefix, lets S3 verify each
upload with SHA-256 additional checksums, and writes `_MANIFEST.json` last with a
conditional write. Readers treat a prefix without a valid manifest as absent.
"""

MANIFEST_NAME = "_MANIFEST.json"

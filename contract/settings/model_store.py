"""Model store settings: the S3 bucket that holds pinned model weights."""

from __future__ import annotations

from pydantic import Field

from .base import Section


class ModelStoreSettings(Section):
    # Only a throwaway stack should let `pulumi destroy` delete a bucket full of weights.
    force_destroy: bool = False
    noncurrent_version_expiration_days: int = Field(default=30, ge=1, le=3650)
    abort_incomplete_multipart_days: int = Field(default=2, ge=1, le=30)
    # Name of a Secret (key `token`) in the serving namespace, for gated or private models.
    hugging_face_token_secret: str | None = Field(default=None, pattern=r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")

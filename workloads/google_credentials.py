"""The Application Default Credentials file checked before google-auth reads it, shared by the day-2 CLI's GKE
path (`workloads/ray_connection.py`) and the doctor (`tools/doctor/google_clients.py`). google-auth opens the key
file, and an external account's `credential_source.file`, with a plain `open()`: a directory is an
IsADirectoryError traceback, a FIFO waits for a writer for ever (google/auth/_default.py
`load_credentials_from_file`, google/auth/identity_pool.py `_FileSupplier`, google-auth 2.62.2). Its messages
repeat the key file's path and `type`, and a token endpoint's `error_description`: every message from it goes
through `message`. Standard library only.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Optional

from workloads import cli_args

CREDENTIALS_ENV = "GOOGLE_APPLICATION_CREDENTIALS"
MAX_CREDENTIALS_BYTES = 64 * 1024  # a key is ~2.4 KB, a federation config < 2 KB: more is no credentials file
MAX_SUBJECT_TOKEN_BYTES = 1 << 20  # a subject token (an OIDC JWT, a SAML assertion) is a few KB


class BadCredentialsFile(ValueError):
    """The ADC file, or the file an external account reads its subject token from, is unusable (one line, no
    secret): `path` names the file, `why` says what is wrong."""

    def __init__(self, path: str, why: str, where: str):
        self.path, self.why = cli_args.shown_line(path, 300), why
        super().__init__(f"{where} {self.path} ({why})")


def well_known_file(environ: Mapping[str, str]) -> Path:
    """Where `gcloud auth application-default login` writes the ADC (google/auth/_cloud_sdk.py
    `get_application_default_credentials_path`: `$CLOUDSDK_CONFIG`, else ~/.config/gcloud)."""
    config = environ.get("CLOUDSDK_CONFIG") or os.path.join(os.path.expanduser("~"), ".config", "gcloud")
    return Path(config) / "application_default_credentials.json"


def check_credentials_file(environ: Mapping[str, str] = os.environ) -> None:
    """`BadCredentialsFile` when the ADC file (GOOGLE_APPLICATION_CREDENTIALS, else gcloud's well-known file) is not
    a regular file of a JSON object, or is an external account whose `credential_source.file` is not a regular file;
    a missing path is google-auth's to say. A `credential_source.url` is fetched by google-auth within its timeout."""
    path: Optional[str] = environ.get(CREDENTIALS_ENV)
    where = f"{CREDENTIALS_ENV} names"
    if not path:
        path, where = str(well_known_file(environ)), "the application-default credentials file of gcloud is"
    if not os.path.lexists(path):
        return
    try:
        parsed = cli_args.loads_json(cli_args.read_user_file(path, MAX_CREDENTIALS_BYTES))
    except cli_args.UnreadableFile as exc:
        raise BadCredentialsFile(path, str(exc).partition("; allowed")[0], where) from None
    except ValueError:  # the content is never echoed: it may be a secret
        raise BadCredentialsFile(path, "not JSON", where) from None
    if not isinstance(parsed, dict):
        raise BadCredentialsFile(path, f"a JSON {type(parsed).__name__}, not an object", where)
    source = parsed.get("credential_source")
    if parsed.get("type") != "external_account" or not isinstance(source, dict) or "file" not in source:
        return
    token_file = source["file"]
    if not isinstance(token_file, str) or not token_file:
        raise BadCredentialsFile(path, "its credential_source.file is not a path", where)
    try:
        cli_args.read_user_file(token_file, MAX_SUBJECT_TOKEN_BYTES)
    except cli_args.UnreadableFile as exc:
        shown = cli_args.shown_line(token_file, 300)
        why = f"its credential_source.file {shown} {str(exc).partition('; allowed')[0]}; allowed: a regular file"
        raise BadCredentialsFile(path, why, where) from None


def message(exc: BaseException, limit: int = 300) -> str:
    """google-auth's message as one bounded line with no credential (it repeats a key file's path and `type`, a
    token endpoint's `error_description`); its exception's name when it says nothing."""
    text = str(getattr(exc, "message", None) or exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return cli_args.shown_line(line, limit)

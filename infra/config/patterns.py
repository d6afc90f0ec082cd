"""The string patterns stack-file values are held to, and in `PATTERN_HELP` each one in the words an error
gives (`errors.format_validation_error`; a pattern without words is shown as the regular expression)."""

from __future__ import annotations

SAFE_TOKEN = r"^[A-Za-z0-9._/:=+~@%,\-\[\]]+$"
"""Values that end up on a command line or in a cloud name: no shell metacharacters, no newlines."""
LOWER_NAME = r"^[a-z]([a-z0-9-]*[a-z0-9])?$"
NAME_PREFIX = r"^([a-z][a-z0-9-]{0,19})?$"
RESOURCE_ID = r"^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$"
LUSTRE_FILESYSTEM = r"^[A-Za-z0-9]{1,8}$"
PROJECT_ID = r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$"
ABSOLUTE_PATH = r"^/[A-Za-z0-9._/\-]*$"
REGION = r"^[a-z]+-[a-z]+[0-9]+$"
ZONE = r"^[a-z]+-[a-z]+[0-9]+-[a-z]$"
# [0-9], never \d: pydantic's regex engine (Rust) reads \d as any Unicode digit, so full-width `１.３５` and
# Arabic-Indic `١.٧` would pass, to fail only at `pulumi up`: versions and times are ASCII.
CHART_VERSION = r"^[0-9]+\.[0-9]+\.[0-9]+$"
GKE_VERSION = r"^[0-9]+\.[0-9]+(\.[0-9]+(-gke\.[0-9]+)?)?$"
HH_MM = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"
DISK_IMAGE = r"^(projects/[a-z][-a-z0-9]{4,28}[a-z0-9]/)?global/images/[a-z]([-a-z0-9]{0,61}[a-z0-9])?$"
"""A disk image as the GKE node pool's `secondaryBootDisks.diskImage` takes it (GKE "Use secondary boot disks
to preload data or container images": `disk-image=global/images/NAME`, or with the project of another one)."""

PATTERN_HELP = {
    SAFE_TOKEN: "letters, digits and . _ / : = + ~ @ % , - [ ] (no spaces, quotes, shell metacharacters or newlines)",
    LOWER_NAME: "lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen",
    NAME_PREFIX: "1-20 lowercase letters, digits or hyphens, starting with a letter",
    RESOURCE_ID: "1-63 lowercase letters, digits or hyphens, starting with a letter and ending with a letter or digit",
    LUSTRE_FILESYSTEM: "1-8 letters or digits",
    PROJECT_ID: "a Google Cloud project id: 6-30 lowercase letters, digits or hyphens, starting with a letter",
    ABSOLUTE_PATH: "an absolute path of letters, digits and . _ / -",
    REGION: "a region name such as us-east1",
    ZONE: "a zone name such as us-east1-b",
    CHART_VERSION: "a version such as 1.7.0 (ASCII digits)",
    GKE_VERSION: "a GKE version such as 1.35 or 1.35.0-gke.1000 (ASCII digits)",
    HH_MM: "a UTC time HH:MM such as 03:00 (ASCII digits)",
    DISK_IMAGE: "an image as global/images/NAME, projects/PROJECT/global/images/NAME or its full URL "
    "(https://www.googleapis.com/compute/v1/projects/PROJECT/global/images/NAME)",
}

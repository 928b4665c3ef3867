"""Moved to the rules floor (``rules/fit.py``, ``rules/versions.py``, ``rules/invariants.py``).

Only ``framework.py`` still imports from here; it is being rewritten on another branch (issue 19).
Delete this module when that lands and imports ``rules.versions`` instead.
"""

from __future__ import annotations

from ..rules.versions import describe_versions

__all__ = ["describe_versions"]

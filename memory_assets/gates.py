"""Validation, the exclusion policy and the secret gate: what may become a memory unit, decided before storage."""

from __future__ import annotations

import difflib
import hashlib
import re
import unicodedata
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal, overload

from memory_assets import vocabulary as V
from memory_assets.errors import ValidationError


@dataclass(frozen=True)
class Candidate:
    """A unit someone wants remembered, with its provenance; nothing stored yet."""

    project: str
    kind: str
    type: str
    title: str
    body: str
    paths: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()
    confidence: float = V.DEFAULT_CONFIDENCE
    importance: float = V.DEFAULT_IMPORTANCE
    feed: str = "api"
    task_id: str | None = None
    session_id: str | None = None
    persona: str | None = None
    model: str | None = None
    observed_sha: str | None = None
    source_ref: str | None = None
    valid_from: datetime | None = None
    visibility: str = V.DEFAULT_VISIBILITY
    source_text: str | None = field(default=None, repr=False)

    @property
    def content_hash(self) -> str:
        return content_hash(self.kind, self.title, self.body)

    @property
    def idempotency_key(self) -> str:
        parts = (self.project, self.task_id or "", self.source_ref or "", self.kind, self.content_hash)
        return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()

    @property
    def initial_status(self) -> str:
        if self.confidence < V.REVIEW_BELOW_CONFIDENCE:
            return "review"
        return "active" if self.confidence >= V.ACTIVE_FROM_CONFIDENCE else "proposed"


def normalise(text: str) -> str:
    """Unicode NFKC, lower case, whitespace collapsed: the form two texts are compared in."""
    return " ".join(unicodedata.normalize("NFKC", text).lower().split())


def content_hash(kind: str, title: str, body: str) -> str:
    """sha256 of normalised kind|title|body: equal for texts that differ only in case and spacing."""
    return hashlib.sha256(f"{kind}|{normalise(title)}|{normalise(body)}".encode()).hexdigest()


# --- Validation ---------------------------------------------------------------------------

def iso_time(field_name: str, text: str, *, naive_is_utc: bool = False) -> datetime:
    """An ISO 8601 time read from text (CLI flags, JSON lines, MCP arguments); naive ones as UTC when asked."""
    try:
        value = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        raise ValidationError(field_name, f"must be an ISO 8601 time (got {text!r})") from None
    return value.replace(tzinfo=UTC) if naive_is_utc and value.tzinfo is None else value


@overload
def text_field(field_name: str, value: object, max_chars: int, *, required: Literal[True] = True) -> str: ...
@overload
def text_field(field_name: str, value: object, max_chars: int, *, required: bool) -> str | None: ...
def text_field(field_name: str, value: object, max_chars: int, *, required: bool = True) -> str | None:
    """A stripped text field within its limit (None for an absent optional one); ValidationError names the field."""
    if value is None:
        if required:
            raise ValidationError(field_name, "is required")
        return None
    if not isinstance(value, str):
        raise ValidationError(field_name, f"must be a string, got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(field_name, "must be valid UTF-8") from None
    if "\x00" in value:
        raise ValidationError(field_name, "must not contain NUL characters")
    value = value.strip()
    if required and not value:
        raise ValidationError(field_name, "must not be empty")
    if len(value) > max_chars:
        raise ValidationError(field_name, f"at most {max_chars} characters (got {len(value)})")
    return value or None


def _items(field_name: str, values: object, max_items: int) -> tuple[str, ...]:
    if values is None:
        return ()
    if isinstance(values, str) or not isinstance(values, (list, tuple)):
        raise ValidationError(field_name, "must be a list of strings")
    if len(values) > max_items:
        raise ValidationError(field_name, f"at most {max_items} items (got {len(values)})")
    items = [text_field(f"{field_name}[{i}]", v, V.ITEM_MAX_CHARS) for i, v in enumerate(values)]
    return tuple(dict.fromkeys(items))  # de-duplicated, order kept


def _unit_interval(field_name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(field_name, f"must be a number between 0 and 1, got {value!r}")
    if not 0.0 <= float(value) <= 1.0:
        raise ValidationError(field_name, f"must be between 0 and 1 (got {value})")
    return float(value)


def project_name(value: object) -> str:
    """A valid project name, or ValidationError naming the field and the rule."""
    project = text_field("project", value, V.PROJECT_MAX_CHARS)
    if not re.match(V.PROJECT_PATTERN, project):
        raise ValidationError("project", "letters, digits, '.', '_' and '-' only, starting with a letter or digit")
    return project


def validate(
    *,
    project: object,
    kind: object,
    type: object,
    title: object,
    body: object,
    paths: object = None,
    keywords: object = None,
    confidence: object = V.DEFAULT_CONFIDENCE,
    importance: object = V.DEFAULT_IMPORTANCE,
    feed: object = "api",
    task_id: object = None,
    session_id: object = None,
    persona: object = None,
    model: object = None,
    observed_sha: object = None,
    source_ref: object = None,
    valid_from: object = None,
    visibility: object = V.DEFAULT_VISIBILITY,
    source_text: object = None,
) -> Candidate:
    """Check every field against its limit and return a Candidate; raise ValidationError naming the field."""
    project_ = project_name(project)
    kind_ = text_field("kind", kind, 32)
    if kind_ not in V.KINDS and kind_ not in V.FORBIDDEN_KINDS:
        raise ValidationError("kind", f"must be one of {', '.join(V.KINDS)} (got {kind_!r})")
    type_ = text_field("type", type, 32)
    if type_ not in V.TYPES:
        raise ValidationError("type", f"must be one of {', '.join(V.TYPES)} (got {type_!r})")
    if valid_from is not None:
        if not isinstance(valid_from, datetime):
            raise ValidationError("valid_from", "must be a datetime")
        if valid_from.tzinfo is None:
            raise ValidationError("valid_from", "must be timezone-aware")
    if not isinstance(visibility, str) or visibility not in V.VISIBILITIES:
        raise ValidationError("visibility", f"must be one of {', '.join(V.VISIBILITIES)} (got {visibility!r})")
    persona_ = text_field("persona", persona, V.ID_MAX_CHARS, required=False)
    if visibility == V.VISIBILITY_PRIVATE and not persona_:
        raise ValidationError("persona", "required when visibility is private (the persona that may recall it)")
    return Candidate(
        project=project_,
        kind=kind_,
        type=type_,
        title=text_field("title", title, V.TITLE_MAX_CHARS),
        body=text_field("body", body, V.BODY_MAX_CHARS),
        paths=_items("paths", paths, V.PATHS_MAX),
        keywords=_items("keywords", keywords, V.KEYWORDS_MAX),
        confidence=_unit_interval("confidence", confidence),
        importance=_unit_interval("importance", importance),
        feed=text_field("feed", feed, V.ID_MAX_CHARS),
        task_id=text_field("task_id", task_id, V.ID_MAX_CHARS, required=False),
        session_id=text_field("session_id", session_id, V.ID_MAX_CHARS, required=False),
        persona=persona_,
        model=text_field("model", model, V.ID_MAX_CHARS, required=False),
        observed_sha=text_field("observed_sha", observed_sha, V.ID_MAX_CHARS, required=False),
        source_ref=text_field("source_ref", source_ref, V.ID_MAX_CHARS, required=False),
        valid_from=valid_from,
        visibility=visibility,
        source_text=text_field("source_text", source_text, V.SOURCE_TEXT_MAX_CHARS, required=False),
    )


# --- Exclusion policy ---------------------------------------------------------------------

WORD = re.compile(r"[A-Za-z0-9_]+")
SESSION_SUMMARY = re.compile(
    r"\b(in this session|this session,? (i|we)|session summary|summary of (the|this|today'?s) session|"
    r"today (i|we) (worked|did|fixed|implemented|looked)|(i|we) worked on|what (i|we) did( today)?|"
    r"(i|we) spent (the|this) session)\b",
    re.IGNORECASE,
)
TASK_STATE = re.compile(
    r"(\b(PR|MR|pull request|merge request)\s*#?\d+\b|/pull/\d+|/merge_requests/\d+|"
    r"\bthis (PR|MR|pull request|branch)\b|"
    r"\bI (have |just )?(implemented|fixed|added|changed|refactored|updated|opened|merged)\b|"
    r"\b(ticket|task|issue)\s*#?\d+\b|\bTODO\b|\bWIP\b)",
    re.IGNORECASE,
)
REPRO = re.compile(r"(\brepro(duce)?\s*:|```)", re.IGNORECASE)
LOCATOR = re.compile(
    r"^(\S*[/\\]\S*|\S+\.[A-Za-z0-9]{1,6}(:\d+)?|[A-Za-z_][A-Za-z0-9]*(\.|::|#)[A-Za-z_][\w.:#]*|"
    r"[a-z0-9]+(_[a-z0-9]+)+|[a-z]+[A-Z][A-Za-z0-9]*|[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*|\S*[()\[\]{}]\S*)$"
)
LOCATOR_FILLER = frozenset({"see", "in", "at", "and", "or", "the", "a", "an", "of", "is", "are", "to", "file", "files",
                            "function", "class", "module", "method", "line", "lines", "defined", "lives", "here"})


def word_tokens(text: str) -> set[str]:
    """Lower-case word tokens: the token set Jaccard compares."""
    return {w.lower() for w in WORD.findall(text)}


def jaccard(a: set[int] | set[str], b: set[int] | set[str]) -> float:
    """Overlap of two token sets: shared over all."""
    return len(a & b) / len(a | b) if a and b else 0.0


def token_hashes(text: str) -> list[int]:
    """The token set of a text as signed 64-bit hashes, so canon texts are compared without being stored."""
    return sorted({int.from_bytes(hashlib.blake2b(t.encode(), digest_size=8).digest(), "big", signed=True)
                   for t in word_tokens(text)})


def is_locator_only(body: str) -> bool:
    """True for an answer made of paths and identifiers with no relation term and hardly any prose."""
    words = body.split()
    if not words:
        return False
    lowered = {w.lower().strip(".,;:!?") for w in words}
    if lowered & set(V.RELATION_TERMS):
        return False
    prose = [w for w in words
             if not LOCATOR.match(w.strip(".,;:!?'\"`")) and w.lower().strip(".,;:!?") not in LOCATOR_FILLER]
    return len(prose) <= V.LOCATOR_MAX_PROSE_WORDS


def verbatim_share(body: str, source_text: str) -> float:
    """Share of the body's characters that appear, in order, as runs copied from the source text."""
    body_n, source_n = normalise(body), normalise(source_text)
    if not body_n:
        return 0.0
    matcher = difflib.SequenceMatcher(None, body_n, source_n, autojunk=False)
    copied = sum(block.size for block in matcher.get_matching_blocks() if block.size >= 12)
    return copied / len(body_n)


def exclusion_reason(candidate: Candidate, canon: list[list[int]] | None = None) -> str | None:
    """The first exclusion rule a candidate breaks, or None; `canon` holds the project's canon token-hash sets."""
    if candidate.kind in V.FORBIDDEN_KINDS:
        return V.REASON_DECISION_KIND

    def applies(reason: str) -> bool:
        return candidate.kind in V.EXCLUSION_KINDS[reason]

    text = f"{candidate.title}\n{candidate.body}"
    if applies(V.REASON_SESSION_SUMMARY) and SESSION_SUMMARY.search(text):
        return V.REASON_SESSION_SUMMARY
    if applies(V.REASON_TASK_STATE) and (
        TASK_STATE.search(text) or (candidate.task_id and candidate.task_id.lower() in text.lower())
    ):
        return V.REASON_TASK_STATE
    if applies(V.REASON_LOCATOR_ONLY) and is_locator_only(candidate.body):
        return V.REASON_LOCATOR_ONLY
    if (applies(V.REASON_VERBATIM_FILE_TEXT) and candidate.source_text
            and verbatim_share(candidate.body, candidate.source_text) >= V.VERBATIM_MIN_SHARE):
        return V.REASON_VERBATIM_FILE_TEXT
    if applies(V.REASON_CANON_DUPLICATE) and canon:
        mine = set(token_hashes(text))
        if any(jaccard(mine, set(chunk)) >= V.CANON_JACCARD_MIN for chunk in canon):
            return V.REASON_CANON_DUPLICATE
    if applies(V.REASON_GOTCHA_WITHOUT_REPRO) and not REPRO.search(candidate.body):
        return V.REASON_GOTCHA_WITHOUT_REPRO
    return None


# --- Secret gate --------------------------------------------------------------------------

EXTRA_SECRET_PATTERNS = {
    "private_key_block": r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
    "aws_access_key": r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b",
    "aws_secret_key": r"(?i)aws.{0,20}(?:secret|key).{0,5}[:=]\s*['\"]?[A-Za-z0-9/+]{40}\b",
    "bearer_token": r"(?i)\bbearer\s+[A-Za-z0-9\-._~+/]{16,}=*",
    "github_token": r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})",
    "gitlab_token": r"\bglpat-[A-Za-z0-9\-_]{20,}",
    "slack_token": r"\bxox[abposr]-[A-Za-z0-9-]{10,}",
    "openai_key": r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
    "anthropic_key": r"\bsk-ant-[A-Za-z0-9_-]{20,}",
    "jwt": r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
    "password_assignment": r"(?i)\b(?:password|passwd|pwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token)"
                           r"\s*=\s*['\"]?[^\s'\";,]{4,}",
    "password_field": r"(?i)\b(?:password|passwd|pwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token)"
                      r"\s*:\s*['\"]?(?=[^\s'\";,]*[0-9\W_])[^\s'\";,]{6,}",
    "credential_url": r"\b[a-z][a-z0-9+.-]*://[^\s:/@]+:[^\s/@]+@[^\s]+",
    "connection_string_password": r"(?i)\b(?:password|pwd)\s*=\s*[^;\s]{3,}\s*;",
    "google_api_key": r"\bAIza[0-9A-Za-z_-]{35}\b",
    "stripe_key": r"\b(?:sk|rk)_live_[0-9A-Za-z]{20,}",
}
_EXTRA = {name: re.compile(pattern) for name, pattern in EXTRA_SECRET_PATTERNS.items()}


def _detect_secrets_plugins() -> list[Any]:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    plugins: dict[str, Any] = get_mapping_from_secret_type_to_class()
    return [cls() for cls in plugins.values() if cls.__name__ not in V.SECRET_PLUGINS_EXCLUDED]


_PLUGINS: list[Any] | None = None


def secret_kinds(text: str) -> list[str]:
    """Names of the secret detectors that fire on the text (detect-secrets' plugins plus our own patterns)."""
    global _PLUGINS
    if _PLUGINS is None:
        _PLUGINS = _detect_secrets_plugins()
    found = [name for name, pattern in _EXTRA.items() if pattern.search(text)]
    for line in text.splitlines():
        for plugin in _PLUGINS:
            if any(True for _ in plugin.analyze_line(filename="memory-unit", line=line, line_number=0)):
                found.append(plugin.secret_type)
    return found


def candidate_text(candidate: Candidate) -> str:
    """Every field the secret gate reads, one per line."""
    return "\n".join([candidate.title, candidate.body, *candidate.paths, *candidate.keywords])


def has_secret(text: str) -> bool:
    return bool(secret_kinds(text))


def gate(candidate: Candidate, canon: list[list[int]] | None = None) -> str | None:
    """The rejection reason for a candidate (exclusion policy, then the secret gate), or None when it may pass."""
    reason = exclusion_reason(candidate, canon)
    if reason:
        return reason
    if has_secret(candidate_text(candidate)):
        return V.REASON_SECRET
    return None


def without_source_text(candidate: Candidate) -> Candidate:
    """The candidate with the source text dropped once gated: it is never stored."""
    return replace(candidate, source_text=None)

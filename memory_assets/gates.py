"""Validation, the exclusion policy and the secret gate: what may become a memory unit, decided before storage."""

from __future__ import annotations

import functools
import hashlib
import importlib
import math
import re
import struct
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal, NamedTuple, overload

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

    @functools.cached_property  # a frozen candidate's: worked out once, not at each of its writer's reads
    def content_hash(self) -> str:
        return content_hash(self.kind, self.title, self.body)

    @functools.cached_property
    def idempotency_key(self) -> str:
        """One key per contribution: a task's replay is a no-op; without a task, who contributed it (feed,
        session, persona, visibility) tells contributions apart, so none collapses into another's source."""
        parts: tuple[str, ...] = (self.project, self.task_id or "", self.source_ref or "", self.kind,
                                  self.content_hash)
        if not self.task_id:
            parts += (self.feed, self.session_id or "", self.persona or "", self.visibility)
        return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()

    @property
    def initial_status(self) -> str:
        if self.confidence < V.REVIEW_BELOW_CONFIDENCE:
            return "review"
        return "active" if self.confidence >= V.ACTIVE_FROM_CONFIDENCE else "proposed"

    @property
    def provenance_ids(self) -> tuple[str, ...]:
        """The ids stored and cited beside the unit, so the secret gate reads them with its text."""
        ids = (self.feed, self.task_id, self.session_id, self.persona, self.model, self.observed_sha, self.source_ref)
        return tuple(i for i in ids if i)


def normalise(text: str) -> str:
    """Unicode NFKC, lower case, whitespace collapsed: the form two texts are compared in."""
    return " ".join(unicodedata.normalize("NFKC", text).lower().split())


def content_hash(kind: str, title: str, body: str) -> str:
    """sha256 of normalised kind|title|body: equal for texts that differ only in case and spacing."""
    return hashlib.sha256(f"{kind}|{normalise(title)}|{normalise(body)}".encode()).hexdigest()


# --- Validation ---------------------------------------------------------------------------

TIME_MIN = datetime.fromisoformat(V.TIME_MIN)
TIME_MAX = datetime.fromisoformat(V.TIME_MAX)
_ID = re.compile(V.ID_PATTERN)
FLOAT32_MIN_NORMAL = 2.0 ** -126  # a REAL rounds no number at or above this to zero
_PROJECT = re.compile(V.PROJECT_PATTERN)
# What a field may hold beyond printable text: "line" fields (titles, items, ids) no control, format or line
# separator character; "text" fields (bodies) tabs and line breaks too; "any" (source text, never stored) all but NUL.
CharRule = Literal["line", "text", "any"]
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})
_TEXT_ALLOWED = frozenset("\n\t")


def one_of(field_name: str, value: object, allowed: Iterable[str], also: Iterable[str] = ()) -> str:
    """`value` when it is one of `allowed` (or of `also`: values taken here that a later gate refuses with its own
    reason); else a ValidationError naming the field and listing `allowed`, the value quoted only as `shown` may."""
    allowed = tuple(allowed)
    if not isinstance(value, str) or (value not in allowed and value not in tuple(also)):
        raise ValidationError(field_name, f"must be one of {', '.join(allowed)} (got {shown(value)})")
    return value


def shown(value: object) -> str:
    """A value as an error message may quote it: short, ASCII, and never a credential."""
    if isinstance(value, str) and has_secret(value[: V.BODY_MAX_CHARS]):
        return "(not shown)"
    text = ascii(value)
    return text if len(text) <= 40 else text[:37] + "..."


_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


def redacted(message: str) -> str:
    """A message that may quote what a caller typed (every error the CLI and the MCP server hand back), each quoted
    value that holds a credential replaced, and one too long to quote (click quotes a refused value whole) counted;
    one whose credential is not quoted is replaced whole."""
    message = _QUOTED.sub(lambda quoted: quoted.group(0) if len(quoted.group(0)) <= V.ERROR_QUOTE_MAX_CHARS
                          else f"(a value of {len(quoted.group(0)) - 2} characters, not shown)", message)
    if not has_secret(message):
        return message
    message = _QUOTED.sub(lambda quoted: "(not shown)" if has_secret(quoted.group(0)) else quoted.group(0), message)
    return message if not has_secret(message) else "a value was refused (not shown: it looks like a credential)"


def bounded_time(field_name: str, value: object) -> datetime:
    """A timezone-aware time within [TIME_MIN, TIME_MAX), so every later cast and interval stays in range."""
    if not isinstance(value, datetime):
        raise ValidationError(field_name, "must be a datetime")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(field_name, "must be timezone-aware")
    if not TIME_MIN <= value < TIME_MAX:
        raise ValidationError(field_name, f"must lie between {V.TIME_MIN[:10]} and {V.TIME_MAX[:10]} (UTC)")
    return value.astimezone(TIME_MIN.tzinfo)  # in UTC: PostgreSQL refuses offsets past 15:59 that Python allows


def iso_time(field_name: str, text: str, *, naive_is_utc: bool = False) -> datetime:
    """An ISO 8601 time read from text (CLI flags, JSON lines, MCP arguments); naive ones as UTC when asked."""
    try:
        value = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        raise ValidationError(field_name, f"must be an ISO 8601 time (got {shown(text)})") from None
    return value.replace(tzinfo=TIME_MIN.tzinfo) if naive_is_utc and value.tzinfo is None else value


def refuse_controls(field_name: str, value: str, rule: CharRule) -> None:
    """ValidationError naming the field when the text holds a control or format character its rule refuses."""
    if rule == "any" or value.isprintable():  # printable: no Cc, Cf, Zl, Zp (the common case, checked in C)
        return
    for char in value:
        if rule == "text" and char in _TEXT_ALLOWED:
            continue
        if unicodedata.category(char) in _REFUSED_CATEGORIES:
            raise ValidationError(field_name, f"must not contain control or format characters (U+{ord(char):04X})")


@overload
def text_field(field_name: str, value: object, max_chars: int, *, required: Literal[True] = True,
               rule: CharRule = "line") -> str: ...
@overload
def text_field(field_name: str, value: object, max_chars: int, *, required: bool,
               rule: CharRule = "line") -> str | None: ...
def text_field(field_name: str, value: object, max_chars: int, *, required: bool = True,
               rule: CharRule = "line") -> str | None:
    """A stripped text field within its limit (None for an absent optional one); ValidationError names the field."""
    if value is None:
        if required:
            raise ValidationError(field_name, "is required")
        return None
    if not isinstance(value, str):
        raise ValidationError(field_name, f"must be a string, got {type(value).__name__}")
    if len(value) > 2 * max_chars + 1024:  # far over the limit: refused before any work on it
        raise ValidationError(field_name, f"at most {max_chars} characters (got {len(value)})")
    if not value.isascii():  # only a lone surrogate fails to encode, and ASCII holds none
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValidationError(field_name, "must be valid UTF-8") from None
    if "\x00" in value:
        raise ValidationError(field_name, "must not contain NUL characters")
    if rule == "text":
        value = value.replace("\r\n", "\n").replace("\r", "\n")  # one line ending, never a bare carriage return
    value = value.strip()
    refuse_controls(field_name, value, rule)
    if required and not value:
        raise ValidationError(field_name, "must not be empty")
    if len(value) > max_chars:
        raise ValidationError(field_name, f"at most {max_chars} characters (got {len(value)})")
    return value or None


@overload
def identifier(field_name: str, value: object, *, required: Literal[True]) -> str: ...
@overload
def identifier(field_name: str, value: object, *, required: bool = False) -> str | None: ...
def identifier(field_name: str, value: object, *, required: bool = False) -> str | None:
    """An id or name in the strict grammar (V.ID_RULE), so no whitespace, control character or homoglyph hides in
    what is stored beside a unit, logged and cited; the value is never quoted back."""
    if value is None and not required:  # most of a candidate's ids are absent
        return None
    text = text_field(field_name, value, V.ID_MAX_CHARS, required=required)
    if text is not None and not _ID.fullmatch(text):
        raise ValidationError(field_name, V.ID_RULE)
    return text


def _items(field_name: str, values: object, max_items: int) -> tuple[str, ...]:
    if values is None:
        return ()
    if isinstance(values, str) or not isinstance(values, (list, tuple)):
        raise ValidationError(field_name, "must be a list of strings")
    if len(values) > max_items:
        raise ValidationError(field_name, f"at most {max_items} items (got {len(values)})")
    items = [text_field(f"{field_name}[{i}]", v, V.ITEM_MAX_CHARS) for i, v in enumerate(values)]
    return tuple(dict.fromkeys(items))  # de-duplicated, order kept


def unit_interval(field_name: str, value: object) -> float:
    """A number in [0, 1] as a float the REAL columns store, range-checked before any conversion can overflow."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(field_name, f"must be a number between 0 and 1, got {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValidationError(field_name, f"must be a finite number between 0 and 1 (got {value})")
    if not 0 <= value <= 1:  # exact for an int of any size: no float() before the range is known
        raise ValidationError(field_name, f"must be between 0 and 1 (got {shown(value)})")
    number = float(value)
    if 0 < number < FLOAT32_MIN_NORMAL and not struct.unpack("f", struct.pack("f", number))[0]:
        return 0.0  # below the smallest REAL: PostgreSQL would refuse it as an underflow
    return number


@functools.lru_cache(maxsize=4096)
def _looks_secret(text: str) -> bool:
    return has_secret(text)


def no_credential(field_name: str, text: str) -> str:
    """A name, id, path or reason that is stored for good (keying counters, events, the audit log), unless it looks
    like a credential: ValidationError naming the field. Cached: the same few names are checked at every call."""
    if _looks_secret(text):
        raise ValidationError(field_name, "looks like a credential and is never stored")
    return text


def project_name(value: object) -> str:
    """A valid project name (never a credential), or ValidationError naming the field and the rule."""
    project = text_field("project", value, V.PROJECT_MAX_CHARS)
    if not _PROJECT.fullmatch(project):
        raise ValidationError("project", "letters, digits, '.', '_' and '-' only, starting with a letter or digit")
    return no_credential("project", project)


def feed_name(value: object) -> str:
    """A valid feed name (the identifier grammar, never a credential): rejections are counted per feed."""
    return no_credential("feed", identifier("feed", value, required=True))


def recorded_names(candidates: Iterable[Candidate]) -> None:
    """Check the project and feed names a write keeps even when the gates reject the text (the rejection counters,
    the audit log), once per name: a Candidate built by hand, never through validate, carried a credential as its
    project into the ledger. ValidationError naming the field."""
    for project in {candidate.project for candidate in candidates}:
        project_name(project)
    for feed in {candidate.feed for candidate in candidates}:
        feed_name(feed)


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
    kind_ = one_of("kind", text_field("kind", kind, 32), V.KINDS, also=V.FORBIDDEN_KINDS)
    type_ = one_of("type", text_field("type", type, 32), V.TYPES)
    valid_from_ = None if valid_from is None else bounded_time("valid_from", valid_from)
    visibility_ = one_of("visibility", visibility, V.VISIBILITIES)
    persona_ = identifier("persona", persona)
    if visibility_ == V.VISIBILITY_PRIVATE and not persona_:
        raise ValidationError("persona", "required when visibility is private (the persona that may recall it)")
    return Candidate(
        project=project_,
        kind=kind_,
        type=type_,
        title=text_field("title", title, V.TITLE_MAX_CHARS),
        body=text_field("body", body, V.BODY_MAX_CHARS, rule="text"),
        paths=_items("paths", paths, V.PATHS_MAX),
        keywords=_items("keywords", keywords, V.KEYWORDS_MAX),
        confidence=unit_interval("confidence", confidence),
        importance=unit_interval("importance", importance),
        feed=feed_name(feed),
        task_id=identifier("task_id", task_id),
        session_id=identifier("session_id", session_id),
        persona=persona_,
        model=identifier("model", model),
        observed_sha=identifier("observed_sha", observed_sha),
        source_ref=identifier("source_ref", source_ref),
        valid_from=valid_from_,
        visibility=visibility_,
        source_text=text_field("source_text", source_text, V.SOURCE_TEXT_MAX_CHARS, required=False, rule="any"),
    )


# --- Exclusion policy ---------------------------------------------------------------------

WORD = re.compile(r"[A-Za-z0-9_]+")
# Each rule's phrases, regexes matched ignoring case: a rule fires where any of its phrases occurs in the text
# (a session summary's phrase as whole words)
SESSION_SUMMARY_PHRASES = (
    r"in this session", r"this session,? (i|we)", r"session summary", r"summary of (the|this|today'?s) session",
    r"today (i|we) (worked|did|fixed|implemented|looked)", r"(i|we) worked on", r"what (i|we) did( today)?",
    r"(i|we) spent (the|this) session",
)
TASK_STATE_PHRASES = (
    r"\b(PR|MR|pull request|merge request)\s*#?\d+\b", r"/pull/\d+", r"/merge_requests/\d+",
    r"\bthis (PR|MR|pull request|branch)\b",
    r"\bI (have |just )?(implemented|fixed|added|changed|refactored|updated|opened|merged)\b",
    r"\b(ticket|task|issue)\s*#?\d+\b", r"\bTODO\b", r"\bWIP\b",
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


def normalised_start(text: str, max_chars: int) -> str:
    """normalise() of as much of the text as gives at most `max_chars`, a piece at a time, each cut after whitespace:
    NFKC makes one character up to eighteen (U+FDFA), and a million of them took the verbatim gate 5 s and 330 MB."""
    pieces: list[str] = []
    size = start = 0
    while start < len(text) and size < max_chars:
        end = start + V.NORMALISE_PIECE_CHARS
        cut = max(text.rfind(c, start, end) for c in " \n\t") if end < len(text) else -1
        if cut > start:  # a word is never split between two pieces
            end = cut + 1
        piece = normalise(text[start:end])
        if piece:
            pieces.append(piece)
            size += len(piece) + 1
        start = end
    return " ".join(pieces)[:max_chars]


def verbatim_share(body: str, source_text: str) -> float:
    """Share of the body's characters covered by runs of V.VERBATIM_SHINGLE_CHARS characters that also occur in the
    source text: one pass over the source against a set of the body's runs, linear where difflib was quadratic."""
    body_n, source_n = normalise(body), normalised_start(source_text, V.SOURCE_TEXT_MAX_CHARS)
    size = V.VERBATIM_SHINGLE_CHARS
    if len(body_n) < size:
        return 0.0
    wanted = {body_n[i:i + size] for i in range(len(body_n) - size + 1)}
    found: set[str] = set()
    for i in range(len(source_n) - size + 1):
        run = source_n[i:i + size]
        if run in wanted:
            found.add(run)
            if len(found) == len(wanted):
                break
    covered = bytearray(len(body_n))
    for i in range(len(body_n) - size + 1):
        if body_n[i:i + size] in found:
            covered[i:i + size] = b"\x01" * size
    return sum(covered) / len(body_n)


def exclusion_reason(candidate: Candidate, canon: list[list[int]] | None = None) -> str | None:
    """The first exclusion rule a candidate breaks, or None; `canon` holds the project's canon token-hash sets."""
    if candidate.kind in V.FORBIDDEN_KINDS:
        return V.REASON_DECISION_KIND

    def applies(reason: str) -> bool:
        return candidate.kind in V.EXCLUSION_KINDS[reason]

    text = f"{candidate.title}\n{candidate.body}"
    if applies(V.REASON_SESSION_SUMMARY) and _SESSION_SUMMARY(text):
        return V.REASON_SESSION_SUMMARY
    if applies(V.REASON_TASK_STATE) and (
        _TASK_STATE(text) or (candidate.task_id and candidate.task_id.lower() in text.lower())
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
# The gate matches a scan form of the text: NFKC (full-width and mathematical letters become ASCII), invisible
# characters removed (format characters such as U+200B, combining marks, unassigned and private-use code points,
# Hangul and Braille fillers, control characters but the line break), and letters and digits of other scripts that
# look like ASCII ones folded to them (Unicode's confusables, with the table below over them).

# The look-alikes Unicode's confusables leave out, or read otherwise (a small palochka is an i to them, an l here);
# every other letter of the fold comes from the confusables (homoglyphs)
_LOOK_ALIKES = {
    "H": ("CYRILLIC CAPITAL LETTER SHHA",),
    "L": ("ARMENIAN CAPITAL LETTER LIWN",),
    "Q": ("CYRILLIC CAPITAL LETTER QA",),
    "b": ("CYRILLIC SMALL LETTER SOFT SIGN",),
    "j": ("LATIN SMALL LETTER DOTLESS J",),
    "k": ("CYRILLIC SMALL LETTER KA", "GREEK SMALL LETTER KAPPA"),
    "l": ("CYRILLIC SMALL LETTER PALOCHKA",),
    "m": ("CYRILLIC SMALL LETTER EM",),
    "x": ("GREEK SMALL LETTER CHI",),
}
# unassigned code points (Cn) count: U+2065, U+FFF0-FFF8 and the tag block's gaps are default-ignorable, drawn as
# nothing, and a credential spelled with them between its characters read as no credential; private use (Co) and
# lone surrogates (Cs) draw no letter either
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Mn", "Me", "Cn", "Co", "Cs"})
_FILLERS = frozenset(unicodedata.lookup(name) for name in (
    "HANGUL CHOSEONG FILLER", "HANGUL JUNGSEONG FILLER", "HANGUL FILLER", "HALFWIDTH HANGUL FILLER",
    "BRAILLE PATTERN BLANK"))
_ASCII_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def scan_form(text: str) -> str:
    """The text as the secret gate reads it: NFKC, invisible characters removed, look-alike letters folded (before
    NFKC too where NFKC gives no ASCII: it would draw a lunate sigma as a plain one)."""
    if not text.isascii():  # NFKC keeps ASCII as it is
        text = unicodedata.normalize("NFKC", text.translate(homoglyphs_before_nfkc()))
    text = text.replace("\t", " ").replace("\r", "\n")
    if text.isascii():
        return _ASCII_CONTROLS.sub("", text)
    kept = (c for c in text if c == "\n" or (unicodedata.category(c) not in _INVISIBLE_CATEGORIES
                                             and c not in _FILLERS))
    return "".join(kept).translate(homoglyphs())


@functools.cache
def homoglyphs() -> dict[int, str]:
    """The look-alike fold, made on the first text that is not ASCII: every character Unicode's confusables give one
    ASCII letter or digit (UTS #39 writes I, l and 1 as l, O and 0 as O: a capital folds to I, a digit to 1 or 0),
    and _LOOK_ALIKES over them."""
    from confusable_homoglyphs.confusables import confusables_data

    fold: dict[int, str] = {}
    for character, entries in confusables_data.items():
        ascii_alike = {entry["c"] for entry in entries if entry["c"].isascii() and entry["c"].isalnum()}
        if character.isascii() or len(character) != 1 or len(ascii_alike) != 1:
            continue
        (alike,) = ascii_alike
        kind = unicodedata.category(character)
        if alike == "l" and kind in ("Lu", "Lt"):
            alike = "I"
        elif alike in ("l", "O") and kind in ("Nd", "No"):
            alike = "1" if alike == "l" else "0"
        fold[ord(character)] = alike
    fold.update((ord(unicodedata.lookup(name)), latin) for latin, names in _LOOK_ALIKES.items() for name in names)
    return fold


@functools.cache
def homoglyphs_before_nfkc() -> dict[int, str]:
    """The look-alikes NFKC would turn into something other than ASCII (a long s is an s to NFKC, not the f it looks
    like)."""
    return {point: alike for point, alike in homoglyphs().items()
            if not unicodedata.normalize("NFKC", chr(point)).isascii()}


_KEYWORD = (r"(?:password|passwd|passphrase|pwd|secret|api[_-]?key|access[_-]?key|access[_-]?token|"
            r"auth[_-]?token|private[_-]?key|client[_-]?secret|credentials?)")
# Tokens with a vendor prefix: distinctive enough to be matched with no word boundary, so a token glued to the
# text before it (fields concatenated, spaces removed) is still found.
PREFIXED_SECRET_PATTERNS = {
    "aws_access_key": r"(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)[0-9A-Z]{16}",
    "github_token": r"(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})",
    "gitlab_token": r"gl(?:pat|rt|ptt|dt)-[A-Za-z0-9\-_]{20,}",
    "slack_token": r"xox[abposr]-[A-Za-z0-9-]{10,}",
    "anthropic_key": r"sk-ant-[A-Za-z0-9_-]{20,}",
    "google_api_key": r"AIza[0-9A-Za-z_-]{35}",
    "stripe_key": r"(?:(?:sk|rk)_live_|(?<![A-Za-z0-9])(?:sk|rk)_test_)[0-9A-Za-z]{20,}",
    "npm_token": r"npm_[A-Za-z0-9]{36}",
    "huggingface_token": r"hf_[A-Za-z0-9]{34}",
    "shopify_token": r"shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}",
    "digitalocean_token": r"do[opr]_v1_[a-f0-9]{64}",
    "databricks_token": r"dapi[a-f0-9]{32}",
    "age_secret_key": r"AGE-SECRET-KEY-1[0-9A-Z]{58}",
    # hex or upper-case bodies, which the random-run check lets pass as hashes: only their prefix tells them apart
    "pulumi_token": r"pul-[a-f0-9]{40}",
    "supabase_token": r"sbp_[a-f0-9]{40}",
    "rubygems_token": r"rubygems_[a-f0-9]{48}",
    "postman_key": r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}",
    "new_relic_key": r"NRAK-[A-Z0-9]{27}",
    "dynatrace_token": r"dt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}",
    "terraform_cloud_token": r"\.atlasv1\.[A-Za-z0-9_=-]{60,70}",  # <14 letters and digits>.atlasv1.<body>
    "figma_token": r"figd_[A-Za-z0-9_-]{40,}",
    "clickup_token": r"pk_[0-9]{6,10}_[0-9A-Z]{32}",
    "jwt": r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
}
EXTRA_SECRET_PATTERNS = {
    **PREFIXED_SECRET_PATTERNS,
    "private_key_block": r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
    "der_key_body": r"(?<![A-Za-z0-9+/])MI[IG][A-Za-z0-9+/]{20,}",  # base64 DER: a PEM body without its header
    "aws_secret_key": r"(?i)aws.{0,20}(?:secret|key).{0,5}[:=]\s*['\"]?[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])",
    "bearer_token": r"(?i)\bbearer\s+[A-Za-z0-9\-._~+/]{16,}=*",
    "openai_key": r"(?<![A-Za-z0-9])sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
    # KEYWORD= value, also as the tail of an environment name (HEROKU_API_KEY=, DB_PASSWORD=)
    "password_assignment": rf"(?i)(?<![A-Za-z0-9]){_KEYWORD}\s*=\s*['\"]?(?=[^\s'\";,]*[A-Za-z0-9])[^\s'\";,]{{4,}}",
    # the name's last "_" after a letter or digit: matching the whole name from its start backtracked through every
    # "_" of a long run, quadratic in it (an attacker's pass: 2 s for 14 kB of "a_"); lookaheads read a bounded run
    "env_secret_assignment": r"(?i)(?<=[A-Za-z0-9])_(?:key|token|secret|password|passwd|pwd)"
                             r"\s*[:=]\s*['\"]?(?=[^\s'\"]{0,256}\d)[A-Za-z0-9+/=_.\-]{8,}",
    "password_field": rf"(?i)(?<![A-Za-z0-9]){_KEYWORD}\s*:\s*['\"]?(?=[^\s'\";,]*[0-9\W_])[^\s'\";,]{{6,}}",
    "credential_url": r"\b[a-z][a-z0-9+.-]*://[^\s:/@]+:[^\s/@]+@[^\s]+",
    # a prefix common in prose ("key-value"), so kept to a whole word with a digit in it
    "mailgun_key": r"(?<![A-Za-z0-9])(?:pub)?key-(?=[a-z]{0,31}[0-9])[0-9a-z]{32}(?![0-9a-z])",
    "asana_token": r"/[0-9]{16}(?:/[0-9]{16})?:[a-f0-9]{32}(?![a-f0-9])",  # 1/<16 digits>:<32 hex>
    "connection_string_password": r"(?i)\b(?:password|pwd)\s*=\s*[^;\s]{3,256}\s*;",
}
Screen = Callable[[str], object]
_EXTRA = {name: re.compile(pattern) for name, pattern in EXTRA_SECRET_PATTERNS.items()}
_PREFIXED = {name: _EXTRA[name] for name in PREFIXED_SECRET_PATTERNS}
# The regex parser of this Python (private: where it differs, _screen gives no screen and every pattern runs).
_sre: Any = importlib.import_module("re._constants")
_sre_parse: Any = importlib.import_module("re._parser")


def _required_literals(items: Any) -> list[tuple[str, ...]]:
    """Groups of literals read off a parsed pattern, such that every match contains one literal of each group:
    runs of literal characters, inside groups and repeats taken at least once, and one literal per alternative of
    a branch whose every alternative requires one."""
    groups: list[tuple[str, ...]] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            groups.append(("".join(run),))
            run.clear()

    for op, av in items:
        if op is _sre.LITERAL:
            run.append(chr(av))
            continue
        flush()
        if op is _sre.SUBPATTERN:
            groups += _required_literals(av[3])
        elif op is _sre.ATOMIC_GROUP:
            groups += _required_literals(av)
        elif op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT, _sre.POSSESSIVE_REPEAT) and av[0] >= 1:
            groups += _required_literals(av[2])
        elif op is _sre.BRANCH:
            choices: list[str] = []
            for alternative in av[1]:
                required = _required_literals(alternative)
                if not required:
                    break
                choices += max(required, key=lambda group: min(map(len, group)))
            else:
                groups.append(tuple(dict.fromkeys(choices)))
    flush()
    return groups


def _case_fold_table() -> dict[int, str] | None:
    """What `str.lower` leaves unlike the regex engine's case-insensitive match of an ASCII letter, mapped to that
    letter: U+0130 (lowered to "i" plus a combining dot; the engine lowers it to "i") and the engine's extra cases
    (U+0131 for "i", U+017F for "s"); None where this Python keeps them elsewhere (no case-insensitive screens)."""
    extra_cases = getattr(importlib.import_module("re._casefix"), "_EXTRA_CASES", None)
    if not isinstance(extra_cases, dict):
        return None
    table = {0x130: "i"}
    table.update({other: chr(letter) for letter, others in extra_cases.items() if letter < 128 for other in others})
    return table


_CASE_FOLD = _case_fold_table()


@functools.lru_cache(maxsize=8)
def case_folded(text: str) -> str:
    """The text as case-insensitive screens read it, one character for each: a literal of ASCII letters occurs in
    it exactly where the regex engine matches that literal ignoring case (an ASCII text holds none of the fold's
    characters: lower() alone). Cached: every screen of a form reads it."""
    return text.lower() if text.isascii() else text.translate(_CASE_FOLD or {}).lower()


def _parsed(pattern: re.Pattern[str]) -> tuple[list[Any], bool] | None:
    """The pattern as this Python's regex parser reads it, and whether any of it ignores case; None where the parser
    differs (no screen, no hint: the pattern always runs)."""
    try:
        parsed = _sre_parse.parse(pattern.pattern, pattern.flags)
        return list(parsed), bool(parsed.state.flags & re.IGNORECASE) or _ignores_case_in_a_group(parsed.data)
    except (AttributeError, TypeError, ValueError, IndexError, re.error):
        return None


def _ignores_case_in_a_group(node: Any) -> bool:
    """Whether a group anywhere in a parsed pattern turns case-insensitivity on for itself ((?i:…), (?mi:…)): a
    literal inside it then matches other cases, so the pattern's screen and hint must read the case-folded text."""
    if isinstance(node, _sre_parse.SubPattern):
        return _ignores_case_in_a_group(node.data)
    if isinstance(node, (list, tuple)):
        if len(node) == 2 and node[0] is _sre.SUBPATTERN and node[1][1] & re.IGNORECASE:
            return True
        return any(_ignores_case_in_a_group(item) for item in node)
    return False


def _any_literal(literals: tuple[str, ...]) -> Screen:
    """One search that finds any of the literals in a text (none: finds nothing), its alternation nested by shared
    prefix, so each position of the text tries one branch per character instead of every literal (0.6x the time)."""
    trie: dict[str, Any] = {}
    for literal in literals:
        node = trie
        for char in literal:
            node = node.setdefault(char, {})
        node[""] = {}  # a literal ends here: its prefix alone is a match, and what follows it no longer matters
    return re.compile(_alternation(trie) if literals else "(?!)").search


def _alternation(node: dict[str, Any]) -> str:
    """The regex of a trie of literals: the first characters as branches, each followed by its subtree's."""
    if "" in node:
        return ""
    branches = [re.escape(char) + _alternation(child) for char, child in sorted(node.items())]
    return branches[0] if len(branches) == 1 else f"(?:{'|'.join(branches)})"


def _screen_needles(pattern: re.Pattern[str]) -> tuple[tuple[str, ...], bool] | None:
    """The literals _screen tests for (one of them is in every text the pattern matches) and whether they are read
    in the case-folded text, or None where it has no screen."""
    read = _parsed(pattern)
    if read is None:
        return None
    items, ignores_case = read
    if not items or (items[0][0] is _sre.LITERAL and not ignores_case) or (ignores_case and _CASE_FOLD is None):
        return None
    groups = _required_literals(items)
    if not groups:
        return None
    best = max(groups, key=lambda group: min(map(len, group)))
    if not ignores_case:
        return tuple(best), False
    needles = tuple(dict.fromkeys(needle.lower() for needle in best))
    return (needles, True) if all(needle.isascii() for needle in needles) else None


def _screen(pattern: re.Pattern[str]) -> Callable[[str], object] | None:
    """A substring test for the pattern's most telling required literal, false only where the pattern cannot
    match; None (the pattern always runs) where it requires no literal, or starts with one and heeds case (the regex
    engine skips ahead by itself). A case-insensitive pattern's test reads the case-folded text (str.lower costs
    less than the engine's case-insensitive search: 27 us of ~120 us a candidate went to nine such patterns)."""
    return _needle_screen(_screen_needles(pattern))


def _needle_screen(screened: tuple[tuple[str, ...], bool] | None) -> Callable[[str], object] | None:
    """The substring test of _screen_needles' literals (None: no screen)."""
    if screened is None:
        return None
    needles, folded = screened
    if folded:
        if len(needles) == 1:
            (folded_needle,) = needles
            return lambda text: folded_needle in case_folded(text)

        def folded_screen(text: str) -> bool:
            folded = case_folded(text)
            return any(needle in folded for needle in needles)

        return folded_screen
    if len(needles) == 1:
        needle = needles[0]
        return lambda text: needle in text
    return lambda text: any(needle in text for needle in needles)


def any_phrase(phrases: Iterable[str]) -> Callable[[str], bool]:
    """Whether a text holds any of the phrases (regexes ignoring case), as their alternation says, each searched for
    only where its screen lets it match, since the engine tries every branch of an alternation at every position;
    where every phrase has a screen, a text holding none of their literals is cleared by one search."""
    compiled = [re.compile(p, re.IGNORECASE) for p in phrases]
    screened = [_screen_needles(pattern) for pattern in compiled]
    searches = [(pattern.search, _needle_screen(needles)) for pattern, needles in zip(compiled, screened, strict=True)]

    def each(text: str) -> bool:
        return any((screen is None or screen(text)) and search(text) is not None for search, screen in searches)

    if any(needles is None or not needles[1] for needles in screened):
        return each
    any_needle = _any_literal(tuple(dict.fromkeys(needle for needles in screened if needles for needle in needles[0])))
    return lambda text: any_needle(case_folded(text)) is not None and each(text)


_SESSION_SUMMARY = any_phrase(rf"\b(?:{phrase})\b" for phrase in SESSION_SUMMARY_PHRASES)
_TASK_STATE = any_phrase(TASK_STATE_PHRASES)


class Hint(NamedTuple):
    """Literals one of which every match of a pattern holds, none holding whitespace, so that each stays whole in
    the text with its whitespace removed (whatever form of the text the pattern reads: its lines, the lines joined
    or merged, or stripped); case-folded where the pattern ignores case."""

    needles: tuple[str, ...]
    folded: bool


def _hint(pattern: re.Pattern[str]) -> Hint | None:
    """The pattern's hint: of its required literals (each cut to its longest piece without whitespace, a piece of a
    required literal being required too), the group whose shortest is longest; None (the pattern always runs) where
    none is at least SECRET_HINT_MIN_CHARS long in every choice, or the case-folded form cannot be trusted."""
    read = _parsed(pattern)
    if read is None:
        return None
    items, ignores_case = read
    if ignores_case and _CASE_FOLD is None:
        return None
    best: tuple[str, ...] = ()
    for group in _required_literals(items):
        pieces = tuple(max(_WHITESPACE.split(literal), key=len) for literal in group)
        if ignores_case:
            pieces = tuple(piece.lower() for piece in pieces)
            if not all(piece.isascii() for piece in pieces):
                continue
        if min(map(len, pieces)) >= max(V.SECRET_HINT_MIN_CHARS, min(map(len, best), default=0) + 1):
            best = pieces
    return Hint(tuple(dict.fromkeys(best)), ignores_case) if best else None


class Hints(NamedTuple):
    """Every hinted detector's literals, and the detectors that run whatever the text holds."""

    cased: tuple[str, ...]
    folded: tuple[str, ...]
    screened: list[tuple[str, Screen, Screen | None]]  # of _SCREENED
    prefixed: dict[str, re.Pattern[str]]  # of _PREFIXED
    searches: tuple[tuple[Any, Screen, Screen | None], ...]  # of _screened_plugins' regex plugins
    any_cased: Screen  # finds any of `cased` in one search (half the time of a test per literal)
    any_folded: Screen  # any of `folded`, in a case-folded text

    def absent(self, stripped: str) -> bool:
        """True when the text (whitespace removed) holds no hinted detector's literal: none of them can fire."""
        if self.any_cased(stripped):
            return False
        return not (self.folded and self.any_folded(case_folded(stripped)))


# Every pattern with the screen that lets has_secret skip it on a text it cannot match
# (test_has_secret_agrees_with_every_detector holds has_secret to secret_kinds on hostile and random text).
_SCREENED: list[tuple[str, Screen, Screen | None]] = [(name, pattern.search, _screen(pattern))
                                                      for name, pattern in _EXTRA.items()]
_BLOB = re.compile(rf"[A-Za-z0-9+/_-]{{{V.SECRET_BLOB_MIN_CHARS},}}")  # "=" only pads: never inside
_WHITESPACE = re.compile(r"\s+")
_SCAN_FILENAME = "memory-unit"  # the file name detect-secrets' plugins are told (no extension: no file type)


def _detect_secrets_plugins() -> list[Any]:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    plugins: dict[str, Any] = get_mapping_from_secret_type_to_class()
    return [cls() for cls in plugins.values() if cls.__name__ not in V.SECRET_PLUGINS_EXCLUDED]


@functools.cache
def _plugins() -> list[Any]:
    return _detect_secrets_plugins()


def _plugin_screen(plugin: Any) -> Screen | None:
    """A cheap test that is false only when a plugin that is no plain regex plugin cannot fire on a line (None:
    always run it), built from the plugin's own patterns: the keyword plugin (on our file name: the quotes-required
    patterns, each containing detect-secrets' keyword list) needs a keyword and a quote; the entropy plugins (quoted
    strings only, no eager search) need a quote; the JWT plugin a match of its patterns."""
    from detect_secrets.plugins import jwt, keyword
    from detect_secrets.plugins.high_entropy_strings import HighEntropyStringsPlugin
    from detect_secrets.util.filetype import determine_file_type

    if isinstance(plugin, keyword.KeywordDetector):
        patterns = keyword.REGEX_BY_FILETYPE.get(determine_file_type(_SCAN_FILENAME),
                                                 keyword.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP)
        if patterns is not keyword.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP or not all(
                keyword.DENYLIST_REGEX in p.pattern and keyword.QUOTE in p.pattern for p in patterns):
            return None
        stems = re.compile("|".join(keyword.DENYLIST), re.IGNORECASE).search
        quote = re.compile(keyword.QUOTE).search
        return lambda line: quote(line) and stems(line)
    if isinstance(plugin, HighEntropyStringsPlugin) and plugin.regex.pattern.startswith("([\\'\"])"):
        return lambda line: "'" in line or '"' in line
    if isinstance(plugin, jwt.JwtTokenDetector):  # the formally valid ones of its patterns' matches: none, no match
        searches = [pattern.search for pattern in plugin.denylist]
        return lambda line: any(search(line) for search in searches)
    return None


@functools.cache
def _screened_plugins() -> tuple[tuple[tuple[Any, Screen, Screen | None], ...], tuple[tuple[Any, Screen | None], ...]]:
    """The plugins in two flat lists: regex plugins as (plugin, denylist search) pairs, one per pattern, so a clean
    line costs one C call per pattern; the others with their screens."""
    from detect_secrets.plugins.base import BasePlugin, RegexBasedDetector

    searches: list[tuple[Any, Screen, Screen | None]] = []
    others: list[tuple[Any, Screen | None]] = []
    for plugin in _plugins():
        cls = type(plugin)
        if (isinstance(plugin, RegexBasedDetector) and cls.analyze_string is RegexBasedDetector.analyze_string
                and cls.analyze_line is BasePlugin.analyze_line):
            searches += [(plugin, regex.search, _screen(regex)) for regex in plugin.denylist]
        else:
            others.append((plugin, _plugin_screen(plugin)))
    return tuple(searches), tuple(others)


@functools.cache
def _hints() -> Hints:
    """The hinted detectors' literals, and the detectors a text holding none of them must still pass: ours and the
    regex plugins' patterns with no hint (detect-secrets' other plugins always run, with their screens)."""
    cased: list[str] = []
    folded: list[str] = []
    unhinted: list[re.Pattern[str]] = []
    searches = _screened_plugins()[0]
    for pattern in [*_EXTRA.values(), *(_plugin_pattern(search) for _, search, _ in searches)]:
        hint = _hint(pattern)
        if hint is None:
            unhinted.append(pattern)
        else:
            (folded if hint.folded else cased).extend(hint.needles)
    cased_needles, folded_needles = tuple(dict.fromkeys(cased)), tuple(dict.fromkeys(folded))
    return Hints(cased_needles, folded_needles,
                 [entry for entry in _SCREENED if _EXTRA[entry[0]] in unhinted],
                 {name: pattern for name, pattern in _PREFIXED.items() if pattern in unhinted},
                 tuple(entry for entry in searches if _plugin_pattern(entry[1]) in unhinted),
                 _any_literal(cased_needles), _any_literal(folded_needles))


def _plugin_pattern(search: Screen) -> re.Pattern[str]:
    """The compiled pattern a regex plugin's search (a bound Pattern.search) belongs to."""
    pattern: re.Pattern[str] = search.__self__  # type: ignore[attr-defined]  # Screen is any callable
    return pattern


@functools.cache
def _entropy() -> Any:
    """detect-secrets' Shannon entropy over the base64 alphabet (its Base64HighEntropyString plugin's measure)."""
    from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString

    return Base64HighEntropyString().calculate_shannon_entropy


_SEGMENT = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+|[^A-Za-z0-9]+")


def is_random_blob(run: str) -> bool:
    """True for a run of base64 characters that looks random: both cases and digits, short segments (CamelCase
    words are long) and high entropy; identifiers, paths, hex digests and uuids are not."""
    n = len(run)
    upper = sum(c.isupper() for c in run)
    lower = sum(c.islower() for c in run)
    if (n < V.SECRET_BLOB_MIN_CHARS or not any(c.isdigit() for c in run)
            or min(upper, lower) < V.SECRET_BLOB_MIN_CASE_SHARE * n):
        return False
    return (n / len(_SEGMENT.findall(run)) <= V.SECRET_BLOB_MAX_SEGMENT
            and _entropy()(run) >= V.SECRET_BLOB_MIN_ENTROPY)


def _blobs(text: str) -> bool:
    for match in _BLOB.finditer(text):
        run = match.group()
        if is_random_blob(run) or any(is_random_blob(part) for part in re.split(r"[_-]+", run)):
            return True
    return False


def _chunks(text: str) -> list[str]:
    """The text's lines, short neighbours merged with a space (the plugins read lines; fewer calls, same tokens)."""
    chunks: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if chunks and len(chunks[-1]) + len(line) < V.SECRET_SCAN_CHUNK_CHARS:
            chunks[-1] += " " + line
        else:
            chunks.append(line)
    return chunks


def _detections(text: str, screened: bool) -> Iterator[str]:
    """The detectors that fire on the text's scan form, on it with line breaks removed (a token split over fields or
    lines) and, for prefixed tokens, on it with all whitespace removed: our patterns, the unquoted-blob check, then
    detect-secrets' plugins; screened, each is skipped where its screen proves it cannot fire."""

    unscreened = not screened
    lines = scan_form(text)
    joined = lines.replace("\n", "")
    forms = [lines] if joined == lines else [lines, joined]
    stripped = "".join(lines.split())  # every character the regex class \s matches (str.isspace) removed
    searches, others = _screened_plugins()
    detectors, prefixed = _SCREENED, _PREFIXED
    if screened and (hints := _hints()).absent(stripped):  # no hinted detector can fire: the others alone
        detectors, prefixed, searches = hints.screened, hints.prefixed, hints.searches
    for name, search, screen in detectors:
        for form in forms:
            if (unscreened or screen is None or screen(form)) and search(form):
                yield name
                break
    yield from (name for name, pattern in prefixed.items() if pattern.search(stripped))
    if any(_blobs(form) for form in forms):
        yield "high_entropy_blob"
    for line in {*_chunks(lines), joined}:
        for plugin, search, screen in searches:
            if ((unscreened or screen is None or screen(line)) and search(line)
                    and plugin.analyze_line(filename=_SCAN_FILENAME, line=line, line_number=0)):
                yield plugin.secret_type
        for plugin, needs in others:
            if ((unscreened or needs is None or needs(line))
                    and plugin.analyze_line(filename=_SCAN_FILENAME, line=line, line_number=0)):
                yield plugin.secret_type


def secret_kinds(text: str) -> list[str]:
    """Names of every detector that fires, each run without its screen: what a rejection is reported as, and the
    reference has_secret's screens are tested against."""
    return list(dict.fromkeys(_detections(text, screened=False)))


def candidate_text(candidate: Candidate) -> str:
    """Every field the secret gate reads, one per line: the text, its paths and keywords, and its provenance ids."""
    return "\n".join([candidate.title, candidate.body, *candidate.paths, *candidate.keywords,
                      *candidate.provenance_ids])


def has_secret(text: str) -> bool:
    """True when any secret detector fires on the text (each line, and the lines joined): secret_kinds' verdict,
    stopping at the first, each detector screened so a clean text costs a fraction of naming every detector."""
    return next(_detections(text, screened=True), None) is not None


def gate(candidate: Candidate, canon: list[list[int]] | None = None) -> str | None:
    """The rejection reason for a candidate (exclusion policy, then the secret gate), or None when it may pass."""
    reason = exclusion_reason(candidate, canon)
    if reason:
        return reason
    if has_secret(candidate_text(candidate)):
        return V.REASON_SECRET
    return None


def without_source_text(candidate: Candidate) -> Candidate:
    """The candidate with the source text dropped once gated: it is never stored (one without any is itself)."""
    return candidate if candidate.source_text is None else replace(candidate, source_text=None)

"""The one home of every constant, status set and threshold in memory-assets."""

from __future__ import annotations

# --- What a unit is -------------------------------------------------------------------------
KINDS = ("codemap", "gotcha", "recipe", "env", "qa", "note")
FORBIDDEN_KINDS = ("decision",)  # decisions belong in ADRs, never in memory
TYPES = ("episodic", "semantic", "procedural")
STATUSES = ("proposed", "review", "active", "flagged", "stale", "superseded", "retired", "forgotten")
LIVE_STATUSES = ("proposed", "review", "active", "flagged", "stale")  # unique per (project, kind, hash)

TITLE_MAX_CHARS = 80
BODY_MAX_CHARS = 1200
PATHS_MAX = 32
KEYWORDS_MAX = 32
ITEM_MAX_CHARS = 200  # one path, keyword or persona
PROJECT_MAX_CHARS = 64
PROJECT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
ID_MAX_CHARS = 200  # task, session, feed, persona, model, commit ids
SOURCE_TEXT_MAX_CHARS = 1_000_000

TOKEN_PREFIX = "mem-"
TOKEN_PATTERN = r"^mem-(\d{1,9})$"

# --- Initial status policy ------------------------------------------------------------------
# confidence < REVIEW_BELOW_CONFIDENCE -> review; >= ACTIVE_FROM_CONFIDENCE -> active; else proposed.
REVIEW_BELOW_CONFIDENCE = 0.6
ACTIVE_FROM_CONFIDENCE = 0.8
DEFAULT_CONFIDENCE = 0.8
DEFAULT_IMPORTANCE = 0.5
DEFAULT_TRUST = 0.5

# --- Remember outcomes ----------------------------------------------------------------------
OUTCOME_DUPLICATE = "duplicate"
OUTCOME_REJECTED = "rejected"

# --- Exclusion gate -------------------------------------------------------------------------
REASON_DECISION_KIND = "decision_kind"
REASON_SESSION_SUMMARY = "session_summary"
REASON_TASK_STATE = "task_state"
REASON_LOCATOR_ONLY = "locator_only"
REASON_VERBATIM_FILE_TEXT = "verbatim_file_text"
REASON_CANON_DUPLICATE = "canon_duplicate"
REASON_GOTCHA_WITHOUT_REPRO = "gotcha_without_repro"
REASON_SECRET = "secret"
REJECTION_REASONS = (
    REASON_DECISION_KIND,
    REASON_SESSION_SUMMARY,
    REASON_TASK_STATE,
    REASON_LOCATOR_ONLY,
    REASON_VERBATIM_FILE_TEXT,
    REASON_CANON_DUPLICATE,
    REASON_GOTCHA_WITHOUT_REPRO,
    REASON_SECRET,
)
ENGINEERING_KINDS = ("codemap", "gotcha", "recipe", "env", "qa")
# Which kinds each exclusion applies to. Conversation notes ("I implemented a workout plan") are
# legitimate memory, so the engineering-hygiene rules skip them; the secret gate applies to all.
EXCLUSION_KINDS = {
    REASON_SESSION_SUMMARY: ENGINEERING_KINDS,
    REASON_TASK_STATE: ENGINEERING_KINDS,
    REASON_LOCATOR_ONLY: ("qa", "codemap"),
    REASON_VERBATIM_FILE_TEXT: KINDS,
    REASON_CANON_DUPLICATE: KINDS,
    REASON_GOTCHA_WITHOUT_REPRO: ("gotcha",),
}
RELATION_TERMS = (
    "because", "must", "before", "after", "only", "never", "unless", "requires", "require",
    "instead", "when", "if", "otherwise", "so", "since", "avoid", "always", "until", "breaks",
    "fails", "needs", "need", "should", "calls", "owns", "handles", "depends", "returns",
)
VERBATIM_MIN_SHARE = 0.8
CANON_JACCARD_MIN = 0.6
CANON_CHUNK_MIN_TOKENS = 5
LOCATOR_MAX_PROSE_WORDS = 2

# --- Secret detection -----------------------------------------------------------------------
# detect-secrets plugins that are not about secrets (a public IP is not a credential).
SECRET_PLUGINS_EXCLUDED = ("IPPublicDetector",)

# --- Dagster --------------------------------------------------------------------------------
PARTITION_START_DATE = "2024-01-01"
ASSET_GROUP_LEDGER = "ledger"
INBOX_SENSOR_INTERVAL_SECONDS = 60

# --- Embedded server ------------------------------------------------------------------------
HOME_ENV = "MEMORY_ASSETS_HOME"
DATABASE_URL_ENV = "DATABASE_URL"
DEFAULT_HOME_DIRNAME = ".memory_assets"
DAGSTER_DATABASE = "dagster"
POOL_MAX_SIZE = 20

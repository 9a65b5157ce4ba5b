"""The one home of every constant, status set and threshold in memory-assets."""

from __future__ import annotations

# --- What a unit is -------------------------------------------------------------------------
KINDS = ("codemap", "gotcha", "recipe", "env", "qa", "note")
FORBIDDEN_KINDS = ("decision",)  # decisions belong in ADRs, never in memory
TYPES = ("episodic", "semantic", "procedural")
STATUS_PROPOSED = "proposed"
STATUS_REVIEW = "review"
STATUS_ACTIVE = "active"
STATUS_FLAGGED = "flagged"
STATUS_STALE = "stale"
STATUS_SUPERSEDED = "superseded"
STATUS_RETIRED = "retired"
STATUS_FORGOTTEN = "forgotten"
STATUSES = (STATUS_PROPOSED, STATUS_REVIEW, STATUS_ACTIVE, STATUS_FLAGGED, STATUS_STALE, STATUS_SUPERSEDED,
            STATUS_RETIRED, STATUS_FORGOTTEN)
LIVE_STATUSES = (STATUS_PROPOSED, STATUS_REVIEW, STATUS_ACTIVE, STATUS_FLAGGED, STATUS_STALE)  # unique per content
RECALLABLE_STATUSES = (STATUS_ACTIVE, STATUS_SUPERSEDED)  # superseded rows answer as_of questions
CURATABLE_STATUSES = (STATUS_PROPOSED, STATUS_ACTIVE)
CONSOLIDATABLE_STATUSES = (STATUS_ACTIVE, STATUS_STALE)

TITLE_MAX_CHARS = 80
BODY_MAX_CHARS = 1200
PATHS_MAX = 32
KEYWORDS_MAX = 32
ITEM_MAX_CHARS = 200  # one path, keyword or persona
PROJECT_MAX_CHARS = 64
PROJECT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
ID_MAX_CHARS = 200  # task, session, feed, persona, model, commit ids
AUDIT_TEXT_MAX_CHARS = 500  # an actor or a reason the audit log keeps (a forget's reason comes from an agent)
ERROR_QUOTE_MAX_CHARS = 200  # a value an error message quotes back: past this it is only counted, never scanned whole
SOURCE_TEXT_MAX_CHARS = 1_000_000
SOURCE_TEXT_MAX_BYTES = 4 * SOURCE_TEXT_MAX_CHARS  # the most a file of that many characters takes in UTF-8
NORMALISE_PIECE_CHARS = 65_536  # a source text is normalised a piece at a time, up to SOURCE_TEXT_MAX_CHARS of it

# who may recall a contribution: every reader of the project, or only the persona that contributed it
VISIBILITY_PROJECT = "project"
VISIBILITY_PRIVATE = "private"
VISIBILITIES = (VISIBILITY_PROJECT, VISIBILITY_PRIVATE)
DEFAULT_VISIBILITY = VISIBILITY_PROJECT

TOKEN_PREFIX = "mem-"
TOKEN_PATTERN = "^" + TOKEN_PREFIX + r"([0-9]{1,9})\Z"  # ASCII digits only, nothing after them

# Provenance: where a contribution came from. One list that the API, the CLI, imports, the inbox and the SQL
# column lists of memory_inbox / memory_sources derive from.
PROVENANCE_FIELDS = ("feed", "task_id", "session_id", "persona", "model", "observed_sha", "source_ref", "visibility")
# The fields of one candidate unit, provenance included (source_text is read by the gates and never stored).
CONTENT_FIELDS = ("project", "kind", "type", "title", "body", "paths", "keywords", "confidence", "importance",
                  "valid_from")
CANDIDATE_FIELDS = CONTENT_FIELDS + PROVENANCE_FIELDS + ("source_text",)
# what the inbox keeps of a candidate: its content, its provenance, and what the gates decided
INBOX_COLUMNS = ("idempotency_key", *CONTENT_FIELDS, *PROVENANCE_FIELDS, "status", "content_hash")
# their types in the inbox (text where not named), told to the capture's COPY: it then picks each value's dumper once
# per column instead of inspecting every value of every row (half the COPY's CPU a row)
INBOX_COLUMN_TYPES = tuple({"paths": "text[]", "keywords": "text[]", "confidence": "real", "importance": "real",
                            "valid_from": "timestamptz"}.get(column, "text") for column in INBOX_COLUMNS)

# Inbox outcomes of a folded candidate
INBOX_INSERTED = "inserted"
INBOX_DUPLICATE = "duplicate"
INBOX_FORGOTTEN = "forgotten"
# memory_remember_gated's outcomes when it writes nothing: the kill switch is on (SWITCH_KILLED), or the project's canon
# changed since the gates read it (the caller reads it again and gates anew, up to REMEMBER_CANON_ATTEMPTS times)
CANON_CHANGED = "canon_changed"
REMEMBER_CANON_ATTEMPTS = 5
CORRECT_ATTEMPTS = 5  # a correction read again when another changed the unit's text between its read and its write
CANON_PROJECTS_KEPT = 1024  # projects whose canon (token hashes, with its version) a process keeps for its writes

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
REASON_FORGOTTEN = "forgotten"  # the same content was forgotten in this project: it never comes back
REASON_REFUSED_BY_DATABASE = "refused_by_database"  # past the gates, its unit refused by a CHECK: the row dropped
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
CANON_TEXT_MAX_CHARS = 1_000_000  # one canon document (every later write of its project is compared with its chunks)
CANON_MAX_CHUNKS = 2000  # its paragraphs of CANON_CHUNK_MIN_TOKENS or more words
LOCATOR_MAX_PROSE_WORDS = 2

STOPWORDS = frozenset(["a", "an", "the", "and", "or", "but", "of", "to", "in", "on", "at", "for", "with", "by", "from",
                       "as", "is", "are", "was", "were", "be", "been", "being", "do", "does", "did", "what", "when",
                       "where", "which", "who", "whom", "whose", "why", "how", "that", "this", "these", "those", "it",
                       "its", "i", "you", "he", "she", "we", "they", "me", "him", "her", "us", "them", "my", "your",
                       "his", "our", "their", "have", "has", "had", "not", "no", "yes", "can", "could", "would",
                       "should", "will", "shall", "may", "might", "must", "about", "into", "over", "after", "before",
                       "than", "then", "there", "here", "if", "so", "just", "also", "any", "all", "some"])

# --- Secret detection -----------------------------------------------------------------------
# detect-secrets plugins that are not about secrets (a public IP is not a credential).
# IPs are no secret; detect-secrets' OpenAI pattern is quadratic in a run of "sk-a" and finds nothing our openai_key
# pattern misses (every sk- key it names starts so)
SECRET_PLUGINS_EXCLUDED = ("IPPublicDetector", "OpenAIDetector")
# An unquoted run of base64 characters is a credential when it is at least this long, has upper and lower case
# letters and a digit, breaks into short segments (a segment: a capital and its lower-case letters, a run of capitals,
# digits or symbols; random base64 of 24-64 chars: mean <= 2.67 in 99 % of draws; CamelCase identifiers and paths:
# >= 2.9) and its Shannon entropy (detect-secrets' measure) is high: random base64 of 24 chars scores >= 3.9 in 99 %.
SECRET_BLOB_MIN_CHARS = 24
SECRET_BLOB_MIN_ENTROPY = 3.7
SECRET_BLOB_MAX_SEGMENT = 2.75   # mean segment length of a random-looking run
SECRET_BLOB_MIN_CASE_SHARE = 0.15  # upper and lower case each at least this share of the run (hex + a name: no)
SECRET_SCAN_CHUNK_CHARS = 400    # short lines are merged up to this length before detect-secrets' plugins read them
# A detector that needs a literal of at least this many characters (of every choice it has) is skipped, with every
# such detector, on a text that holds none of their literals (gates.has_secret); one that needs a shorter one ('.',
# 'gh', 'MI') always runs: so short a literal is in most texts, and testing for it would cost more than it saves.
SECRET_HINT_MIN_CHARS = 3

# --- Input grammar (gates.validate, recall.request.validate_query, the import) ----------------
# Ids and names (project, feed, task_id, session_id, source_ref, persona, model, observed_sha) are ASCII
# identifiers: no whitespace, no control or format character, nothing a homoglyph can hide in.
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/@#+-]*$"
ID_RULE = "ASCII letters, digits and . _ : / @ # + - only, starting with a letter or digit"
TIME_MIN = "1970-01-01T00:00:00+00:00"  # valid_from and as_of are refused outside [TIME_MIN, TIME_MAX)
TIME_MAX = "9000-01-01T00:00:00+00:00"
VERBATIM_SHINGLE_CHARS = 12      # the verbatim gate counts body characters covered by 12-char runs of the source
IMPORT_MAX_LINE_BYTES = 4 * 1024 * 1024  # an import line longer than this is reported, never parsed
IMPORT_ERRORS_SHOWN = 1000  # bad lines an import reports by number (every one is counted)
IMPORT_MAX_DEPTH = 8             # JSON nesting an import line may have (a candidate needs 2)
IMPORT_MAX_NUMBER_CHARS = 64     # digits of one JSON number (Python refuses ints over 4300 digits with ValueError)
IMPORT_BATCH = 1000              # import lines per remember_many call (one transaction each)
IMPORT_FIRST_BATCH = 250        # an import's first batch, each next one twice as large up to IMPORT_BATCH: the first
#                                  fold starts once 250 lines are read, gated (here: under GATE_PROCESS_MIN_BATCH, no
#                                  worker process waited for) and captured, not 1,000
IMPORT_WRITERS = 2               # an import's writer threads: one captures a batch while the other folds the one before
GATE_PROCESS_MIN_BATCH = 256     # remember_many gates in worker processes (when asked to) from this many candidates
GATE_CHUNKS_PER_WORKER = 4       # chunks per gate worker and batch: a slow chunk leaves the others busy
GATE_WORKER_PARENT_CHECK_SECONDS = 1.0  # how often a gate worker checks that the process it was forked from lives

# --- Dagster --------------------------------------------------------------------------------
PARTITION_START_DATE = "2024-01-01"
ASSET_GROUP_LEDGER = "ledger"
ASSET_GROUP_EMBEDDINGS = "embeddings"
ASSET_GROUP_CURATION = "curation"
ASSET_GROUP_LIFECYCLE = "lifecycle"
ASSET_GROUP_DELIVERY = "delivery"
INBOX_SENSOR_INTERVAL_SECONDS = 60
# the sensor folds inbox rows left unfolded this long (bulk imports with --no-fold, a writer that stopped between
# its capture and its fold): younger ones may be a caller's that folds them itself (remember_many(fold_now=False),
# then fold_captured)
INBOX_FOLD_GRACE_SECONDS = 30
# the deployment's run queue (dagster.yaml) runs embedding work one at a time, so a re-embedding backfill never
# starves the daily jobs: embedding runs carry this tag and the unit_embeddings asset holds this pool
RUN_KIND_TAG = "memory_assets/kind"
RUN_KIND_EMBEDDING = "embedding"
EMBEDDING_POOL = "embedding"

# --- Traces (memory_assets.tracing) ---------------------------------------------------------
# OTLP over http/protobuf when the endpoint variable is set and non-empty; otherwise no provider: spans are no-ops.
OTEL_ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
OTEL_SERVICE_NAME_ENV = "OTEL_SERVICE_NAME"  # overrides TRACE_SERVICE_NAME, as every OpenTelemetry SDK does
OTEL_SDK_DISABLED_ENV = "OTEL_SDK_DISABLED"  # "true": no export even with an endpoint
TRACE_SERVICE_NAME = "memory-assets"
TRACER_NAME = "memory_assets"
TRACE_ATTRIBUTE_PREFIX = "memory_assets."  # every attribute this package sets: ids, names, counts, never text
TRACE_VALUE_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._:/@#+|-]{0,199}"  # a string attribute that is not this is dropped
TRACE_REDACTED = "<not an id>"
TRACE_FLUSH_TIMEOUT_MILLIS = 5000  # an asset run waits at most this long for its spans to leave the process
TRACE_INTERFACES = ("api", "cli", "mcp", "dagster")  # who set tracing up: the resource's memory_assets.interface

# --- Embedded server ------------------------------------------------------------------------
HOME_ENV = "MEMORY_ASSETS_HOME"
DATABASE_URL_ENV = "DATABASE_URL"
DEFAULT_HOME_DIRNAME = ".memory_assets"
# The embedded server's own settings, written to this file of its data folder (included from postgresql.conf) each
# time this package starts it: its page cache (shared_buffers) is this share of the memory the machine or its cgroup
# gives, between the bounds, instead of PostgreSQL's 128 MB, which held a third of a 100,000-unit project's vectors
# and HNSW graph (~4 kB a unit), so a walk read most of its pages from the OS (docs/scaling.md item 13)
EMBEDDED_SETTINGS_FILE = "memory_assets.conf"
EMBEDDED_SHARED_BUFFERS_SHARE = 0.25
EMBEDDED_SHARED_BUFFERS_MIN_MB = 128
EMBEDDED_SHARED_BUFFERS_MAX_MB = 8192
DAGSTER_DATABASE = "dagster"
# `make dev`'s dagster.yaml reads Dagster's storage URL from this variable (set for its processes, never on disk)
DAGSTER_STORAGE_URL_ENV = "MEMORY_ASSETS_DAGSTER_STORAGE_URL"
POOL_MAX_SIZE = 20
# Recall's statements with their project as a literal (database.project_plan), so that a prepared plan knows the
# project's size: a connection keeps them for this many projects, each let in once a request found it has units
# (a candidates plan holds ~1.34 MB of the server's memory for the connection's life, the dense leg's alone beside it
# less; the pool replaces a connection after an hour), and the texts composed per project kept in this process
# (~11 kB each)
PROJECT_PLANS_PER_CONNECTION = 8
PROJECT_STATEMENTS_CACHED = 512
# Statistics after a bulk write (database.refresh_statistics): the table the folds and curation grow, the metadata
# key the assets report it under, and how long an ANALYZE waits for a VACUUM or ANALYZE already running on it: under
# the server's deadlock_timeout (1 s by default), past which a waiter cancels autovacuum's own run instead
UNITS_TABLE = "memory_units"
# The unit number at which remember() has the units analysed if no ANALYZE ever read them (autovacuum's first comes
# after 50 rows, within its one-minute nap): a session that first writes to a young store past ~100 units plans the
# write's live probe by (project, number), one btree level shallower, and reads every unit of the project per write
UNITS_ANALYSED_AT_NUMBER = 50
STATISTICS_REFRESHED = "statistics_refreshed"
ANALYZE_LOCK_TIMEOUT_MS = 500
# Self-healing (database.open_pool, database.revive, the dagster.yaml runner.dagster_home writes)
POOL_TIMEOUT_SECONDS = 10.0            # a call waits this long for a connection, then raises PoolTimeout
POOL_RECONNECT_TIMEOUT_SECONDS = 10.0  # a failing reconnect backs off (1, 2, 4 s) for this long, then starts over
CONNECT_TIMEOUT_SECONDS = 5            # libpq connect_timeout: an unreachable TCP server fails instead of hanging
SERVER_RESTART_TIMEOUT_SECONDS = 20.0  # how long a holder retries restarting a crashed embedded server
SERVER_WATCH_INTERVAL_SECONDS = 2.0    # `memory-assets dev` checks the embedded server this often
RUN_MONITORING_POLL_SECONDS = 5        # the daemon checks every in-progress run's worker this often
RUN_START_TIMEOUT_SECONDS = 120        # a run still STARTING after this is marked failed
RUN_CANCEL_TIMEOUT_SECONDS = 60        # a run still CANCELING after this is marked canceled
RUN_MAX_RETRIES = 2                    # a run whose worker died is re-executed from failure at most this often

# --- Embeddings -----------------------------------------------------------------------------
# A model key is name@revision+text version. Register a model here; it becomes a partition of unit_embeddings.
# text versions: t1 = title, body, keywords; t2 = body then title (a second registration of the same weights);
# c1 = t1 with its speaker, then the previous turn of the same session (episodic units; others embed t1's text).
EMBEDDING_MODELS = {
    "minilm-l6@gt0.1-t1": {"loader": "minilm", "name": "all-MiniLM-L6-v2", "revision": "gt-0.1.0", "dim": 384,
                           "text_version": "t1"},
    "minilm-l6@gt0.1-t2": {"loader": "minilm", "name": "all-MiniLM-L6-v2", "revision": "gt-0.1.0", "dim": 384,
                           "text_version": "t2"},
    "minilm-l6@gt0.1-c1": {"loader": "minilm", "name": "all-MiniLM-L6-v2", "revision": "gt-0.1.0", "dim": 384,
                           "text_version": "c1"},
}
# Context-aware text versions read each episodic unit's speaker and the previous turn of its session (the nearest
# lower unit number, at most EMBED_CONTEXT_SCAN back, that shares its session), at most EMBED_CONTEXT_MAX_CHARS of it.
CONTEXT_TEXT_VERSIONS = ("c1",)
EMBED_CONTEXT_SCAN = 8
EMBED_CONTEXT_MAX_CHARS = 300
DEFAULT_SERVING_MODEL = "minilm-l6@gt0.1-t1"
SETTING_SERVING_MODEL = "serving_model"
# memory_settings key prefix (+ model key): the model's HNSW index is still an earlier release's graph of full-
# precision vectors, which recall's walk reads until the current one is built (sql/029, ensure_model_index)
SETTING_HNSW_EARLIER_GRAPH = "hnsw_earlier_graph:"
EMBED_BATCH_SIZE = 64
EMBED_PAGE_SIZE = 512  # units read, encoded and committed per page: a stopped backfill resumes after the last page
EMBED_THREADS = 2
JOURNAL_PAGE_SIZE = 1000
# Fresh embeddings: the embedding sensor reads the change journal this often and requests the serving model's
# (model, day) partitions whose units lack a current vector; at most this many journal pages per tick
EMBED_SENSOR_INTERVAL_SECONDS = 5  # the sensor daemon evaluates sensors at most every 5 s anyway
EMBED_SENSOR_MAX_PAGES = 50
# embeddings_current: WARN when any active unit lacks a current serving vector, ERROR below this coverage
EMBEDDINGS_MIN_COVERAGE = 0.9

# --- Curation -------------------------------------------------------------------------------
MERGE_MIN_COSINE = 0.97    # same project and kind: the newcomer merges into the older unit
REVIEW_MIN_COSINE = 0.85   # semantic/procedural units this close go to review with conflicts_with
# MiniLM scores "VPN rollout deferred to Q3" vs "VPN rollout cancelled" at 0.70 (AkurAI's model: 0.93), so below
# REVIEW_MIN_COSINE a pair still goes to review when the texts differ by a change-of-state word or a value.
CONTRADICTION_MIN_COSINE = 0.6
CHANGE_OF_STATE_TERMS = (
    "not", "no", "never", "cancelled", "canceled", "deferred", "postponed", "delayed", "moved", "replaced",
    "deprecated", "removed", "dropped", "stopped", "instead", "longer", "disabled", "enabled", "reverted",
    "abandoned", "rescheduled", "switched", "changed", "obsolete", "superseded",
)
CURATION_TYPES = ("semantic", "procedural")
MERGE_IMPORTANCE_BUMP = 0.05
PROMOTE_MIN_SOURCES = 2     # proposed -> active with this many independent sources…
PROMOTE_AFTER_DAYS = 1      # …or after this many days without a conflict
REVIEW_DECISIONS = ("approve", "reject", "supersede")

# --- Recall ---------------------------------------------------------------------------------
APP_ROLE = "memory_app"     # the non-owner role every request runs as, under row-level security
READER_ROLE = "memory_reader"  # the analysts' role: SELECT only, never a unit's text (sql/009_read_scopes.sql)
# A libpq URL naming memory_reader (password in ~/.pgpass or PGPASSWORD, never in a file): how notebooks reach a
# server where the reader logs in with a password; unset, analytics.connect() logs in as memory_reader on the
# application's server (DATABASE_URL or the embedded one) without the owner's password
ANALYST_URL_ENV = "MEMORY_ASSETS_ANALYST_URL"
LAB_KERNEL = "memory-assets"   # the Jupyter kernel `make lab` registers: the project's .venv interpreter
NO_PERSONA = ""             # the persona of a reader that names none: persona validation never admits it
OPERATORS_ENV = "MEMORY_ASSETS_OPERATORS"  # the deployment's comma-separated operators: only they may forget
MEMORY_OFF = "off"          # remember's status and recall's mode while the kill switch is on
SWITCH_KILLED = "killed"    # the switch source (and remember's reason) while the kill switch is on
# every write tries this advisory lock shared before it reads the kill switch (sql/functions/memory_writes_killed.sql
# spells it), held to its commit; turning the switch on takes it exclusively once the switch is set, and returns once
# every write that read it off has ended, bounded by KILL_SWITCH_DRAIN_MS. Two keys: PostgreSQL keeps two-key locks
# apart from one-key ones, so no hashtext() of a name an agent picks (a project's bundle lock) can be this lock
KILL_SWITCH_LOCK = (0x6D656D, 0x6B696C6C)  # "mem", "kill"
KILL_SWITCH_DRAIN_MS = 30_000
KILLED_SQLSTATE = "MAKIL"  # what remember()'s one statement raises when the switch read at its end is on (sql/049)
HOLDOUT_MAX_PERCENT = 50    # the holdout arm takes at most half of the epics/tasks
RECALL_DEFAULT_K = 8
RECALL_MAX_K = 100
RECALL_CANDIDATES = 200     # rows each leg contributes before fusion (LoCoMo dev R@10: 100 -> 0.783, 200 -> 0.791)
# A project of at most this many numbered units (memory_last_number: forgotten and retired ones count) has
# every unit recall may return detailed by the full-text statement sent before the question is encoded, so the dense
# statement after the encode is its nearest vectors alone, which recall checks against those details (~0.8 against
# ~2.9 ms on LoCoMo's ~590-unit conversations; under HNSW_MIN_PROJECT_UNITS, the exact path, only), and a question
# whose vector is at hand is asked so too where the connection last found the project this small (item 33); the
# further units cost that statement less than the encode hides below ~1,230 units on a 2-vCPU Xeon since they are
# read once (0.92x at 1,000 units, 1.03x at 1,311; docs/scaling.md items 27 and 29). The same bound marks a project
# small enough that a current request reads its latest decay day whole instead of a score per unit (item 30), and
# whose full-text leg's neighbouring turns recall works out from those details (item 31)
RECALL_ALL_DETAILS_MAX_UNITS = 1_000
RECALL_MAX_QUERY_CHARS = 2000
RECALL_MAX_QUERY_TERMS = 32 # a long query cannot make the full-text leg scan everything
# Fusion: each leg's scores min-max normalised and weighted (score fusion), mixed with weighted reciprocal rank
# fusion. LoCoMo dev R@10 with everything below: RRF alone 0.790, score fusion alone 0.804, this mix 0.803;
# the RRF share keeps a leg with badly calibrated scores from dominating on data we did not tune on.
RRF_K = 10                  # smaller than the usual 60: top ranks of each leg matter more
                            # (RRF alone: 60 -> 0.725, 10 -> 0.751)
RRF_SHARE = 0.3
DENSE_WEIGHT = 1.0
SPARSE_WEIGHT = 1.3         # with the IDF-scored sparse leg (LoCoMo dev R@10: 1.0 -> 0.767, 1.3 -> 0.777, 1.6 -> 0.775)
# Conversation structure and cues, each measured on both halves of the LoCoMo dev conversations (README).
CONTEXT_WINDOW = 2          # neighbouring turns of the same session that share a match's relevance / distance
CONTEXT_WEIGHT = 0.6
CONTEXT_SEEDS = 30
CONTEXT_SEED_RANK = 30      # seeds come from each leg's top 30, whose neighbouring turns recall reads
                            # (60 before: the same R@10 on LoCoMo dev, ~2 ms slower; docs/scaling.md)
SESSION_WEIGHT = 0.75       # every unit of a session gets this share of the session's best relevance
PERSONA_BOOST = 0.6         # a unit whose source persona the query names
TIME_CUE_BOOST = 2.0        # a unit valid from a date the query names ('on 7 July, 2023', 'in May 2023')
TIME_CUE_DAY_SLACK_DAYS = 1 # a named day matches units from the day before to the day after
RECENCY_HALF_LIFE_DAYS = 180
# Query-side stages (issue 16), each a recall() keyword whose None means the default here; off unless measured
# better, and free when off. LoCoMo dev dialog R@10 against 0.8035 (bench/results/locomo_query_side.json): PRF
# 0.7989 (multi-hop +0.007, the rest lower), second round 0.7888 (multi-hop -0.001, open-domain -0.063), both 0.7777.
RECALL_PRF = False          # pseudo-relevance feedback: a round with the top hits' salient terms and a Rocchio vector
RECALL_SECOND_ROUND = False # a sparse round seeded by the entities and salient terms of the top hits (multi-hop)
RECALL_RERANK = False       # a cross-encoder re-scores the top RERANK_TOP_N (weights from RERANKER_PATH_ENV)
FEEDBACK_DOCS = 5           # the first round's best hits (hand-set score) both query-side rounds read
PRF_TERMS = 5               # salient terms (the hits' lexemes by frequency among them x IDF) added to the query
PRF_ROCCHIO_BETA = 0.5      # query vector + beta * the mean of the hits' vectors, back to unit length
PRF_WEIGHT = 0.3            # a unit's relevance: (1 - weights of the rounds run) * first round + weight * round's
SECOND_ROUND_TERMS = 8      # entity terms (capitalised names, personas the query does not name, salient terms)
SECOND_ROUND_WEIGHT = 0.3
RERANKER_PATH_ENV = "MEMORY_ASSETS_RERANKER_PATH"  # a local sentence-transformers CrossEncoder folder
RERANK_TOP_N = 30           # fused candidates the cross-encoder re-scores
RERANK_SHARE = 1.0          # a re-scored hit's score: share * cross-encoder score + (1 - share) * fused score
# Learned fusion (recall/learned.py): a linear ranker over the components above, fitted by `memory-assets eval
# fit-fusion` and shipped beside the code; recall falls back to the hand-set formula when the file is absent,
# unreadable, of another format version, or names other components than the request computes.
FUSION_WEIGHTS_FILE = "fusion_weights.json"   # in memory_assets/recall/ (package data)
FUSION_WEIGHTS_ENV = "MEMORY_ASSETS_FUSION_WEIGHTS"  # another weights file, or "off" for the hand-set formula
FUSION_WEIGHTS_FORMAT = 1   # the file's format version: recall reads only this one
QUERY_VECTOR_CACHE_SIZE = 1024
# Queries are encoded by an ONNX export of the serving model's own weights (embeddings.query_encoder), made once
# under <home>/models; "torch" encodes them like the stored vectors. Against torch's query vectors on LoCoMo's
# questions: the fp32 export gives the same vectors (cosine >= 0.99999); int8 (per-channel weights of the matrix
# products) keeps 0.935 of the top 10 over the conversation's stored vectors (1,033 questions, mean cosine 0.994),
# under the 0.99 issue #15 set, so it stays opt-in.
QUERY_ENCODER = "onnx-fp32"
QUERY_ENCODERS = ("onnx-fp32", "onnx-int8", "torch")
# One thread per question: a dozen tokens gain nothing from a second one (LoCoMo questions, p50 3.4 ms against 4.1),
# and ONNX Runtime's idle workers spin after every call, on a core whatever runs next needs (a torch encode right
# after one took 27.5 ms instead of 5.7; the embedding stage's batches keep EMBED_THREADS)
QUERY_ENCODER_THREADS = 1
# Stored vectors go through the fp32 export too (torch's to 3e-7, faster in sorted batches, and a run that embeds a
# few fresh units starts without importing torch); int8 never: stored vectors must be the model's own
DOCUMENT_ENCODER = "onnx-fp32"
DOCUMENT_ENCODERS = ("onnx-fp32", "torch")
ONNX_MODELS_DIRNAME = "models"
# below: exact, RECALL_CANDIDATES for the fusion; above: the HNSW first phase (bench/recall.py: at 10k units
# 6x faster than exact with the same top 10)
HNSW_MIN_PROJECT_UNITS = 5_000
# from this many units the full-text leg matches through the GIN index (sql/027), below by the project's key: a rare
# term 0.73x at 5,000 units and 0.074x at 100,000, a query whose words every unit holds 1.12x and 1.10x; at 2,000
# units no gain (1.01x)
TEXT_INDEX_MIN_PROJECT_UNITS = 5_000
TEXT_MATCH_MAX_WORDS = 64  # sql/027's own limit: at least RECALL_MAX_QUERY_TERMS + PRF_TERMS and SECOND_ROUND_TERMS
# a project walks the graph only while it holds this share of the store's vectors: below, the walk passes mostly over
# other projects' (1,000 units beside 100,000: 203 ms, 0.79 of the exact top 10) and its own are sorted instead
HNSW_WALK_MIN_SHARE = 0.1
# the HNSW graph's build (embeddings.ensure_model_index names the index after them, so a store built under other
# values rebuilds it once). pgvector's default ef_construction 64 kept 0.84 / 0.90 / 0.95 of the exact top 10 at
# ef_search 100 / 200 / 400 on the scale curve's 100,000 vectors; 128 keeps 0.92 / 0.96 / 0.98 for a 1.3x build,
# and costs the embedding stage 1-7% (its inserts walk the graph too); 200 kept 0.94 / 0.99 / 1.0 for a 1.75x build
# and 1.5x per insert at 100,000 vectors; m 32 (with 200) 0.99 / 1.0 for a 2.7x build (docs/scaling.md item 14)
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 128
# the graph holds half-precision copies of the vectors (the table keeps the model's own; the walk orders by the copies
# and returns exact distances): ~0.58x the index at 100,000 vectors, each insert ~0.8x, the same top 10 (docs/scaling.md
# item 15). A name, not a knob: sql/029's walk spells halfvec itself (migrations are not spelled from here)
HNSW_GRAPH_TYPE = "halfvec"
# one model index build at a time (a session's advisory lock: a build is CREATE INDEX CONCURRENTLY, outside any
# transaction), asked for again at this interval by a run that finds another's build under way
HNSW_BUILD_LOCK = "memory_embeddings_hnsw"
HNSW_BUILD_LOCK_POLL_SECONDS = 0.25
HNSW_BUILD_WAIT_LOG_SECONDS = 60  # a run waiting for another's build says so again at this interval
INDEX_BUILD_CANCEL_TIMEOUT_SECONDS = 5  # an interrupted build's cancel request waits this long for the server
# a replaced index's drop gives up sooner than readers would queue behind it, and a failed build's (concurrent) drop
# sooner than other runs would wait for the build lock it holds
INDEX_DROP_LOCK_TIMEOUT_MS = 500
HNSW_CANDIDATES = 40             # the HNSW phase's dense candidates (or k)
# ef_search grows with the project, sqrt(units) between these bounds (bench/recall.py, synthetic vectors, top 10
# against exact over five index builds: 10k units 1.0 at 100; 100k units 0.80-0.87 at 100, 0.91-0.97 at 316, for a
# p95 of 2.1-2.4x numpy instead of 1.5x: set the maximum to 100 for the faster tail; with ef_construction 128 in the
# full run at c8454ef: 0.90 at 100, 0.976 at 316, 1.19x numpy p95)
HNSW_EF_SEARCH = 100
HNSW_EF_SEARCH_MAX = 400
HNSW_OVERFETCH = 2               # the HNSW phase fetches this many times the candidates before the unit filters
EXACT_OVERFETCH = 1.25           # the exact path sorts this many times the candidates' vectors before the unit filters
CURATION_HNSW_NEIGHBOURS = 100   # curation in a large project: the project's nearest vectors read before the unit
                                 # filters (older, same kind, live, shared); none passing falls back to the exact scan

# --- Lifecycle ------------------------------------------------------------------------------
# trust = (confirms + TRUST_PRIOR_WEIGHT * DEFAULT_TRUST) / (confirms + flags + TRUST_PRIOR_WEIGHT): a Beta-style
# mean that starts at DEFAULT_TRUST, rises with confirmations and falls with flags.
TRUST_PRIOR_WEIGHT = 2.0
FLAG_THRESHOLD = 3               # flags >= this and more flags than confirms -> status flagged (out of recall)
DECAY_HALF_LIFE_DAYS = 30        # recency decay of a unit's last activity
ACTIVATION_WEIGHTS = {"read": 1.0, "cited": 2.0, "followed": 3.0}
ACTIVATION_HALF_LIFE_DAYS = 14
TRUST_DECAY_AFTER_DAYS = 30      # without a confirmation trust starts decaying…
TRUST_DECAY_AFTER_DAYS_CONFIRMED = 90  # …90 days when it was ever confirmed
TRUST_DECAY_HALF_LIFE_DAYS = 60
TRUST_FLOOR = 0.2                # decayed trust approaches this floor and never goes below it
STALE_BELOW_TRUST = 0.25         # an active unit whose decayed trust falls below this becomes stale
# one day's decay at a time (a transaction's advisory lock, by hashtext): a day's marks read the later days' scores
DECAY_LOCK = "decay_scores"
# per project: a forget with the work that derives text from units; a bundle's compile with a forget's scrub of it
DERIVATIONS_LOCK = "derivations:{project}"
BUNDLE_LOCK = "bundle:{project}"
EPISODIC_TTL_DAYS = 90           # from valid_from (or last use): then expired, never deleted
CONSOLIDATION_MIN_CLUSTER = 5
CONSOLIDATION_DISTANCE = 0.75    # agglomerative, average linkage, cosine distance (200 episodes on 5 topics -> 6)
CONSOLIDATION_KEYWORDS = 5
CONSOLIDATION_CENTRAL_TIE = 1e-6  # mean similarities this close tie: the member with the lowest number is central
FEED_CONSOLIDATION = "consolidation"  # the feed, actor and member-link feed of the weekly summaries
AUDIT_FORGET = "forget"  # the audit action of a forget (its time bounds what the tombstone check expects blank)

# --- Delivery -------------------------------------------------------------------------------
EVENT_KINDS = ("injected", "read", "cited", "followed")
CITATION_PATTERN = r"\bmem-([0-9]{1,9})\b"  # ASCII digits: a citation is the token as rendered
CITE_TEXT_MAX_CHARS = 1_000_000  # an agent's output read for citations (a long transcript fits)
CITE_MAX_TOKENS = 1000  # distinct units one output may cite (each is looked up and recorded)
INJECTABLE_TYPES = ("semantic", "procedural")   # episodes are recalled on demand, never pushed into prompts
BUNDLE_MIN_TRUST = 0.35
BUNDLE_PATH_VERIFIED_HOURS = 24  # a unit that names paths must have been confirmed or observed this recently
BUNDLE_MAX_UNITS = 500
BUNDLE_MAX_BYTES = 256 * 1024
BUNDLE_MAX_CODEMAP_SHARE = 0.2
BUNDLE_VERSION = 1
BUNDLE_MAX_REVISION = 2**31 - 1  # memory_bundles.revision is an integer: the widest revision the byte budget counts
PROMPT_MAX_UNITS = 8
PROMPT_MAX_CHARS = 4000
SWITCH_VALUES = ("on", "off")
SYSTEM_DEFAULT_MEMORY = "on"
KILL_LIST_MIN_INJECTIONS = 5
KILL_LIST_MAX_READ_RATE = 0.1
# The arm comparison (analytics.compare_arms, notebooks/read_rate.ipynb) takes the randomised arms only: memory on
# by default (tasks that passed the holdout draw) against the holdout, as (value, source) of memory_task_arms; tasks
# set by hand, by epic or by the kill switch were not assigned by chance and stay out. Per arm: tasks that read, cited
# or followed a unit over the arm's tasks in the trailing window (read_rate_arms, one row per arm and window end).
ARM_ON = ("on", "default")
ARM_HOLDOUT = ("off", "holdout")
ARM_WINDOW_DAYS = 28
ARM_CONFIDENCE = 0.95       # Wilson score interval per arm, Newcombe's hybrid score interval for the difference
# Fewer tasks than this in either arm and a comparison means nothing: with 30 tasks a side the 95 % interval of a
# difference between two rates near 0.5 still spans about ±0.24
ARM_MIN_TASKS = 30

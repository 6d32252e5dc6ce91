"""A batch's UTF-8 size (``utf8_bytes``: what MB/s and the manifest's ``text_bytes`` mean) is each text
encoded and counted, whatever mix of ASCII and other texts, lone surrogates included (JSON can spell
them; they count as ``surrogatepass`` writes them)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from objcli.readers.cutting import utf8_bytes

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

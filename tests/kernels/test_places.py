"""Token places kept as fixes of the piece table (``kernels/places.py``): exact both ways, on any
places (a property) and on a real tokenizer's measured places, where few tokens need a fix."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from objcli.kernels.places import fixes_of, places_of


@settings(max_examples=200, deadline=None)
@given(
    documents=st.lists(
        st.lists(st.tuples(st.integers(0, 30), st.integers(0, 9), st.integers(0, 3)), max_size=40), max_size=8
    ),
    table=st.lists(st.integers(0, 12), min_size=10, max_size=10),
)
def test_places_come_back_from_their_fixes_whatever_they_are(documents, table):
    """Any lengths and backs (a token of any length, starting before the previous end or not), any table:
    the places made from the fixes are the places."""
    table = np.array(table, np.uint8)
    tokens, ends, back, offsets = [], [], [], [0]
    for document in documents:
        end = 0
        for length, token, behind in document:
            end += length
            tokens.append(token)
            ends.append(end)
            back.append(behind)
        offsets.append(len(tokens))
    tokens, offsets = np.array(tokens, np.int64), np.array(offsets, np.int64)
    ends, back = np.array(ends, np.int32), np.array(back, np.int8)
    fixes = fixes_of(tokens, offsets, ends, back, table)
    made_ends, made_back = places_of(tokens, offsets, table, *fixes)
    assert np.array_equal(made_ends, ends) and np.array_equal(made_back, back)
    predicted = (table[tokens] == np.diff(np.concatenate([[0], ends]))) & (back == 0)
    assert len(fixes[0]) <= len(tokens) - predicted.sum() + len(documents)  # only what the table misses


def test_a_real_tokenizers_places_need_few_fixes():
    """SentencePiece and a byte-level BPE on the sample corpus: the measured places, made back exactly from
    fixes on under 1 % of the tokens (a text's first word mark, a character cut between two tokens)."""
    import json

    from runs import SAMPLE

    from objcli.run.provenance import token_places
    from objcli.tokenizers import open_tokenizer

    texts = [json.loads(line)["text"] for line in (SAMPLE / "prose.jsonl").read_text().splitlines()[:200]]
    for path in (SAMPLE / "tokenizer.model", SAMPLE / "llama-style"):
        tokenizer = open_tokenizer(path)
        tokens, offsets = tokenizer.encode(texts, 1)
        ends, back = token_places(tokenizer, texts, tokens, offsets)
        table = tokenizer.piece_char_table()
        fixes = fixes_of(tokens, offsets, ends, back, table)
        assert len(fixes[0]) < 0.01 * len(tokens), (path, len(fixes[0]), len(tokens))
        made = places_of(tokens, offsets, table, *fixes)
        assert np.array_equal(made[0], ends) and np.array_equal(made[1], back)

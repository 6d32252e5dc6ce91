"""Slow, obviously-correct reference versions of the kernels: plain loops over Python lists."""

from __future__ import annotations

import re


def add_boundary_tokens(docs: list[list[int]], bos, eos) -> list[list[int]]:
    out = []
    for doc in docs:
        row = list(doc)
        if bos is not None:
            row = [bos] + row
        if eos is not None:
            row = row + [eos]
        out.append(row)
    return out


def pack_concat(docs: list[list[int]], seq_len: int, pad_id=None, overlap: int = 0):
    """Rows of (input_ids, segment_ids, positions, documents started) and the leftover tokens, one
    token at a time. With ``overlap``, each row starts with the last ``overlap`` tokens of the one
    before (Megatron's windows of seq_len + 1), and a document is counted where it starts outside them."""
    stream = [(token, d, i == 0) for d, doc in enumerate(docs) for i, token in enumerate(doc)]
    rows = []
    while len(stream) >= seq_len or (pad_id is not None and len(stream) > overlap):
        chunk, stream = stream[:seq_len], stream[seq_len - overlap :]
        if len(chunk) < seq_len:
            stream = []
        ids, segs, pos, started = [], [], [], 0
        segment, position, previous_doc = 0, 0, None
        for column, (token, doc, first) in enumerate(chunk):
            if doc != previous_doc:
                segment += 1
                position = 0
                previous_doc = doc
            ids.append(token)
            segs.append(segment)
            pos.append(position)
            position += 1
            started += first and column < seq_len - overlap
        while len(ids) < seq_len:
            ids.append(pad_id)
            segs.append(0)
            pos.append(0)
        rows.append((ids, segs, pos, started))
    return rows, [token for token, _, _ in stream]


def split_long(docs: list[list[int]], max_length: int) -> list[tuple[int, list[int]]]:
    """(source document, piece) for every piece of at most ``max_length`` tokens."""
    pieces = []
    for d, doc in enumerate(docs):
        if not doc:
            pieces.append((d, []))
        for start in range(0, len(doc), max_length):
            pieces.append((d, doc[start : start + max_length]))
    return pieces


# ---- T5 span corruption (REFERENCE §5), one example at a time ----


def t5_raw_lengths(inputs_length, noise_density, mean_span):
    """T5's random_spans_helper, transcribed."""

    def lengths(tokens_length):
        num_noise = int(round(tokens_length * noise_density))
        num_nonnoise = tokens_length - num_noise
        num_spans = int(round(num_noise / mean_span))
        return num_nonnoise + num_spans + 1, num_noise + num_spans + 1

    tokens_length = inputs_length - 1
    while lengths(tokens_length + 1)[0] <= inputs_length:
        tokens_length += 1
    _, targets_length = lengths(tokens_length)
    if noise_density == 0.5 and targets_length > inputs_length:
        tokens_length -= 1
        targets_length -= 1
    return tokens_length, targets_length


def composition(keys, parts):
    """Cut after the items whose gaps have the lowest keys; return the part lengths."""
    total = len(keys) + 1
    gaps = sorted(range(len(keys)), key=lambda g: keys[g])[: parts - 1]
    cuts = sorted(g + 1 for g in gaps)
    bounds = [0] + cuts + [total]
    return [bounds[i + 1] - bounds[i] for i in range(parts)]


def noise_mask(nonnoise_lengths, noise_lengths):
    mask = []
    for nonnoise, noise in zip(nonnoise_lengths, noise_lengths):
        mask += [False] * nonnoise + [True] * noise
    return mask


def corrupt(tokens, mask, sentinels, eos):
    inputs, targets = [], []
    span = -1
    for i, (token, noisy) in enumerate(zip(tokens, mask)):
        starts_span = noisy and (i == 0 or not mask[i - 1])
        if starts_span:
            span += 1
            inputs.append(sentinels[span])
        if not noisy:
            inputs.append(token)
    span = -1
    for i, (token, noisy) in enumerate(zip(tokens, mask)):
        starts_clean_span = (not noisy) and (i == 0 or mask[i - 1])
        if starts_clean_span:
            span += 1
            targets.append(sentinels[span])
        if noisy:
            targets.append(token)
    return inputs + [eos], targets + [eos]


def prefix_split(tokens, k, eos):
    """(encoder inputs, encoder labels, decoder labels) for one example split at k."""
    return tokens[:k] + [eos], tokens[k:] + [eos], [-100] * k + tokens[k:]


# ---- masked LM (REFERENCE §3), one row at a time ----


def mlm_row(
    ids,
    candidates,
    unit_start,
    unit_keys,
    action_keys,
    random_tokens,
    p,
    exact,
    max_predictions,
    mask_id,
    mask_replace,
    random_replace,
):
    units, unit = [], 0
    for i, candidate in enumerate(candidates):
        if candidate and (unit_start[i] or i == 0 or not candidates[i - 1]):
            unit += 1
        units.append(unit if candidate else 0)
    members = {}
    for i, u in enumerate(units):
        if u:
            members.setdefault(u, []).append(i)
    chosen = set()
    if not exact:
        chosen = {u for u in members if unit_keys[u - 1] < p}
    else:
        budget = max(1, int(round(len(ids) * p)))
        if max_predictions is not None:
            budget = min(budget, max_predictions)
        used = 0
        for u in sorted(members, key=lambda u: (unit_keys[u - 1], u)):
            if used >= budget:
                break
            if used + len(members[u]) > budget:
                continue  # BERT skips a word that would overflow, and keeps going
            chosen.add(u)
            used += len(members[u])
    masked, labels = list(ids), [-100] * len(ids)
    for u in chosen:
        for i in members[u]:
            labels[i] = ids[i]
            if action_keys[i] < mask_replace:
                masked[i] = mask_id
            elif action_keys[i] < mask_replace + random_replace:
                masked[i] = random_tokens[i]
    return masked, labels


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, coin):
    """Google BERT's truncate_seq_pair; ``coin()`` says whether to delete from the front."""
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        trunc = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if coin():
            del trunc[0]
        else:
            trunc.pop()
    return tokens_a, tokens_b


def nsp_instances(all_documents, document_index, max_seq_length, short_seq_prob, rng, cls=1, sep=2):
    """Google BERT's create_instances_from_document, transcribed (documents are lists of sentences
    of token ids; ``rng`` is a ``random.Random``). Returns (tokens, segment_ids, is_random_next)."""
    document = all_documents[document_index]
    max_num_tokens = max_seq_length - 3
    target_seq_length = max_num_tokens
    if rng.random() < short_seq_prob:
        target_seq_length = rng.randint(2, max_num_tokens)
    instances, current_chunk, current_length, i = [], [], 0, 0
    while i < len(document):
        segment = document[i]
        current_chunk.append(segment)
        current_length += len(segment)
        if i == len(document) - 1 or current_length >= target_seq_length:
            if current_chunk:
                a_end = rng.randint(1, len(current_chunk) - 1) if len(current_chunk) >= 2 else 1
                tokens_a = [t for s in current_chunk[:a_end] for t in s]
                tokens_b = []
                if len(current_chunk) == 1 or rng.random() < 0.5:
                    is_random_next = True
                    target_b_length = target_seq_length - len(tokens_a)
                    for _ in range(10):
                        random_document_index = rng.randint(0, len(all_documents) - 1)
                        if random_document_index != document_index:
                            break
                    random_document = all_documents[random_document_index]
                    random_start = rng.randint(0, len(random_document) - 1)
                    for j in range(random_start, len(random_document)):
                        tokens_b.extend(random_document[j])
                        if len(tokens_b) >= target_b_length:
                            break
                    i -= len(current_chunk) - a_end
                else:
                    is_random_next = False
                    tokens_b = [t for s in current_chunk[a_end:] for t in s]
                truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, lambda: rng.random() < 0.5)
                tokens = [cls] + tokens_a + [sep] + tokens_b + [sep]
                segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
                instances.append((tokens, segment_ids, is_random_next))
            current_chunk, current_length = [], 0
        i += 1
    return instances


def fim_document(prefix, middle, suffix, mode, order, pre, suf, mid):
    """One FIM document from its three tokenized pieces (REFERENCE §8)."""
    if mode == 1:
        return [pre] + prefix + [suf] + suffix + [mid] + middle
    if order == "starcoder":
        return [pre, suf] + suffix + [mid] + prefix + middle
    return [suf] + suffix + [pre] + prefix + [mid] + middle


def bart_mask_example(tokens, word_start, spans, replace_length, mask):
    """Apply non-overlapping (start word, length in words) spans to one example, token by token."""
    words = [i for i, s in enumerate(word_start) if s]
    bounds = words + [len(tokens)]
    out, inserts = [], {}
    state = ["keep"] * len(tokens)
    for start, length in spans:
        at = bounds[start] if start < len(words) else len(tokens)
        if length == 0:
            inserts.setdefault(at, []).append(mask)
            continue
        end = bounds[start + length] if start + length < len(words) else len(tokens)
        for i in range(at, end):
            if replace_length == -1:
                state[i] = "mask"
            elif replace_length == 1 and i == at:
                state[i] = "mask"
            else:
                state[i] = "drop"
    for i, token in enumerate(tokens):
        out += inserts.get(i, [])
        if state[i] == "keep":
            out.append(token)
        elif state[i] == "mask":
            out.append(mask)
    out += inserts.get(len(tokens), [])
    return out


def best_fit_decreasing(lengths, capacity):
    """Rows as lists of item indices: longest first, into the fullest row that still fits."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    rows, space = [], []
    for item in order:
        fitting = [r for r in range(len(rows)) if space[r] >= lengths[item]]
        if fitting:
            best = min(fitting, key=lambda r: (space[r], r))
        else:
            rows.append([])
            space.append(capacity)
            best = len(rows) - 1
        rows[best].append(item)
        space[best] -= lengths[item]
    return rows


def heads_with_target(rows_of_segment_ids: list[list[int]], heads: int) -> list[list[int]]:
    """Multi-token prediction, one position at a time: count the heads k = 1..K whose target t + k is
    inside the row and in t's segment (padding, segment 0, has none)."""
    out = []
    for row in rows_of_segment_ids:
        depth = []
        for t, segment in enumerate(row):
            count = 0
            for k in range(1, heads + 1):
                if segment != 0 and t + k < len(row) and row[t + k] == segment:
                    count += 1
            depth.append(count)
        out.append(depth)
    return out


def electra_create_example(
    sentences: list[list[int]], target_length: int, max_length: int, one_segment: bool, coins: list[float]
) -> tuple[list[int], list[int]]:
    """ELECTRA's ``ExampleBuilder._create_example`` (build_pretraining_dataset.py), line for line,
    with its random draws passed in: ``one_segment`` for ``random.random() < 0.1`` and ``coins[i]``
    for the coin of sentence i."""
    first_segment_target_length = 100000 if one_segment else (target_length - 3) // 2
    first_segment, second_segment = [], []
    for i, sentence in enumerate(sentences):
        if (
            len(first_segment) == 0
            or len(first_segment) + len(sentence) < first_segment_target_length
            or (len(second_segment) == 0 and len(first_segment) < first_segment_target_length and coins[i] < 0.5)
        ):
            first_segment += sentence
        else:
            second_segment += sentence
    first_segment = first_segment[: max_length - 2]
    second_segment = second_segment[: max(0, max_length - len(first_segment) - 3)]
    return first_segment, second_segment


def electra_mask(
    candidates: list[bool],
    budget: int,
    position_keys: list[float],
    action_keys: list[float],
    mask_replace: float = 0.85,
) -> tuple[set[int], set[int]]:
    """ELECTRA's ``pretrain_helpers.mask`` for one row: ``budget`` categorical draws over the candidates
    (uniform), each a [MASK] when its action key < 0.85; a position drawn twice is one selection.
    Returns (selected positions, positions that become [MASK])."""
    pool = [i for i, c in enumerate(candidates) if c]
    selected, masked = set(), set()
    for draw in range(budget):
        if not pool:
            break
        position = pool[min(int(position_keys[draw] * len(pool)), len(pool) - 1)]
        selected.add(position)
        if action_keys[draw] < mask_replace:
            masked.add(position)
    return selected, masked


def contriever_crop(
    n: int, ratio_key: float, position_key: float, min_ratio: float, max_ratio: float
) -> tuple[int, int]:
    """Contriever's ``randomcrop`` for a unit of n tokens, with its two draws passed in:
    (start, length) of ``x[start:start + int(n * ratio)]``, at least one token."""
    ratio = min_ratio + (max_ratio - min_ratio) * ratio_key
    length = min(max(int(n * ratio), 1), n)
    start = min(int(position_key * (n - length + 1)), n - length)
    return start, length


def augment_view(
    view: list[int],
    crop_key: float,
    delete_keys: list[float],
    swap_keys: list[float],
    delete: float,
    swap: float,
    keep: float,
) -> list[int]:
    """One view through crop, deletion and non-overlapping adjacent swaps, token by token."""
    if keep < 1:
        start, length = contriever_crop(len(view), 1.0, crop_key, keep, keep)
        view = view[start : start + length]
    if delete > 0:
        kept = [t for t, k in zip(view, delete_keys) if k >= delete]
        view = kept if kept or not view else view[:1]
    out = list(view)
    swapped_left = False
    for i in range(len(out) - 1):
        drew = swap_keys[i] < swap
        if drew and not swapped_left and swap > 0:
            out[i], out[i + 1] = out[i + 1], out[i]
        swapped_left = drew
    return out


SENTENCE_CANDIDATE = re.compile(r"""[.!?]["')\]]*(?=\s+["'(\[]?[A-Z0-9])""")
PARAGRAPH = re.compile(r"\n[ \t\r\f\v]*\n")


def _is_letter(character: str) -> bool:
    return re.fullmatch(r"[^\W\d_]", character) is not None


def split_prose(text: str, abbreviations) -> list[str]:
    """Paragraph by paragraph, candidate by candidate: a '.' ends no sentence when the word before
    it (its run of letters and dots), lower-cased, is an abbreviation or a single letter."""
    sentences = []
    for paragraph in PARAGRAPH.split(text):
        start = 0
        for match in SENTENCE_CANDIDATE.finditer(paragraph):
            end = match.start()
            if paragraph[end] == ".":
                word_start = end
                while word_start > 0 and (_is_letter(paragraph[word_start - 1]) or paragraph[word_start - 1] == "."):
                    word_start -= 1
                word = paragraph[word_start:end]
                if word.lower() in abbreviations or (len(word) == 1 and _is_letter(word)):
                    continue
            sentence = paragraph[start : match.end()].strip()
            if sentence:
                sentences.append(sentence)
            start = match.end()
        rest = paragraph[start:].strip()
        if rest:
            sentences.append(rest)
    return sentences


def split_lines(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.strip()]


def pair_row(tokens_a: list[int], tokens_b: list[int], seq_len: int, cls: int, sep: int, pad: int):
    """BERT's row, as ``create_instances_from_document`` lays it out: [CLS] A [SEP] (B [SEP]), padded."""
    ids = [cls, *tokens_a, sep] + ([*tokens_b, sep] if tokens_b else [])
    types = [0] * (len(tokens_a) + 2) + ([1] * (len(tokens_b) + 1) if tokens_b else [])
    padding = seq_len - len(ids)
    return ids + [pad] * padding, types + [0] * padding, [1] * len(ids) + [0] * padding


# ---- per-token forms: list slicing above runs in C; these say what each token does ----


def prefix_split_per_token(tokens, k, eos):
    """``prefix_split`` token by token: before k to the encoder (no loss), from k to the targets."""
    inputs, targets, decoder = [], [], []
    for i, token in enumerate(tokens):
        if i < k:
            inputs.append(token)
            decoder.append(-100)
        else:
            targets.append(token)
            decoder.append(token)
    return inputs + [eos], targets + [eos], decoder


def fim_document_per_token(document, a, b, mode, order, pre, suf, mid):
    """``fim_document`` from a whole document cut at token positions a <= b, token by token."""
    pieces = ([], [], [])
    for i, token in enumerate(document):
        pieces[(i >= a) + (i >= b)].append(token)
    return fim_document(*pieces, mode, order, pre, suf, mid)


def assistant_mask_reference(offsets: list[tuple[int, int]], spans: list[tuple[int, int]]) -> list[int]:
    """transformers' apply_chat_template(return_assistant_tokens_mask=True) loop, for one
    conversation: char_to_token is the first token whose span holds the character."""

    def char_to_token(c):
        return next((t for t, (a, b) in enumerate(offsets) if a <= c < b), None)

    mask = [0] * len(offsets)
    for start, end in spans:
        first, last = char_to_token(start), char_to_token(end - 1)
        if first is None:
            break
        for t in range(first, last + 1 if last else len(offsets)):
            mask[t] = 1
    return mask


def overlap_mask_reference(offsets: list[tuple[int, int]], spans: list[tuple[int, int]]) -> list[int]:
    """Tokens whose character span overlaps any of the spans."""
    return [int(any(a < end and b > start for start, end in spans if end > start)) for a, b in offsets]


def bpe_merge_reference(parts: list[bytes], priority) -> list[bytes]:
    """Byte-pair merging as the papers state it: scan every adjacent pair, merge the one of lowest
    priority (the leftmost on a tie), repeat until no pair has one. ``priority(left, right)`` is
    an int or None."""
    parts = list(parts)
    while len(parts) > 1:
        best, at = None, -1
        for i in range(len(parts) - 1):
            p = priority(parts[i], parts[i + 1])
            if p is not None and (best is None or p < best):
                best, at = p, i
        if best is None:
            break
        parts[at : at + 2] = [parts[at] + parts[at + 1]]
    return parts


def runs_reference(rows: list[list[int]]) -> list[list[tuple[int, int, int]]]:
    """Each row as greedy runs (first value, step 0 or 1, length): a run goes on while the next value is
    its last plus its step (a run of one value takes the step the next value gives, if 0 or 1)."""
    out = []
    for row in rows:
        runs: list[list[int]] = []
        for value in row:
            if runs:
                first, step, length = runs[-1]
                last = first + step * (length - 1)
                if length == 1 and value - last in (0, 1):
                    runs[-1] = [first, value - last, 2]
                    continue
                if length > 1 and value - last == step:
                    runs[-1][2] += 1
                    continue
            runs.append([value, 0, 1])
        out.append([tuple(r) for r in runs])
    return out


def padded_best_fit_rows(examples, capacity, multiple, shift, pad, row_pad):
    """Best-fit rows of examples (lists of (token, label)), each padded to ceil(n / multiple) * multiple + shift
    places (``pad`` and -100 after its tokens), the row's rest ``row_pad`` and -100: per row (tokens, labels,
    segment ids, positions, cu_seqlens, cu_seqlens_padded), one token at a time."""
    slots = [-(-len(e) // multiple) * multiple + shift for e in examples]
    out = []
    for members in best_fit_decreasing(slots, capacity):
        tokens, labels, segments, positions, real, padded = [], [], [], [], [0], [0]
        for segment, item in enumerate(members, start=1):
            for k in range(slots[item]):
                token, label = examples[item][k] if k < len(examples[item]) else (pad, -100)
                tokens.append(token)
                labels.append(label)
                segments.append(segment)
                positions.append(k)
            real.append(real[-1] + len(examples[item]))
            padded.append(padded[-1] + slots[item])
        if len(tokens) < capacity:
            real.append(real[-1])
            padded.append(capacity)
        while len(tokens) < capacity:
            tokens.append(row_pad)
            labels.append(-100)
            segments.append(0)
            positions.append(0)
        out.append((tokens, labels, segments, positions, real, padded))
    return out


def keyed_permutation(index: int, count: int, keys: list[int]) -> int:
    """One index through a Feistel network of len(keys) rounds (SplitMix64's finalizer, Python integers
    masked to 64 bits), walked until it falls inside range(count)."""
    full = (1 << 64) - 1
    half = max(1, (max(count - 1, 1).bit_length() + 1) // 2)
    mask = (1 << half) - 1

    def mix(value: int, key: int) -> int:
        z = (value + key + 0x9E3779B97F4A7C15) & full
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & full
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & full
        return z ^ (z >> 31)

    value = index
    while True:
        left, right = value >> half, value & mask
        for key in keys:
            left, right = right, left ^ (mix(right, key) & mask)
        value = (left << half) | right
        if value < count:
            return value


def with_ids_reference(values: list[int], ids: list[int], vocabulary: int) -> list[int]:
    """A plan's column made, value by value: a store position (vocabulary and up) its id, anything else itself."""
    return [ids[v - vocabulary] if v >= vocabulary else v for v in values]


def in_ranges_reference(lengths, starts, ranges, firsts, outside) -> list[list[int]]:
    """Each example's tokens, one at a time: its value (counting up from ``firsts``) where a range of its covers
    the token, else ``outside``."""
    out = []
    for example, (length, start) in enumerate(zip(lengths, starts)):
        mine = [(a, b) for owner, a, b in zip(*ranges) if owner == example]
        values = [firsts[example] + t - start for t in range(start, start + length)]
        out.append(
            [v if any(a <= t < b for a, b in mine) else outside for t, v in zip(range(start, start + length), values)]
        )
    return out

"""Prompt lengths from token counts (vbench_async/workload/counts.py) are the real tokenizer's and processor's: a text's
count is the length of its ids, a whole prompt's count (frame + text) is what rendering and tokenizing it whole gives
for every family's tiny model, and tokenizers or frames where that is not sure get no shortcut."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vbench_async import families, models
from vbench_async.backends.base import chat_messages
from vbench_async.workload.counts import TextCounter, frame_tokens
from vbench_async.workload.tokens import PromptCounter, VideoGeometry

tokenizers = pytest.importorskip("tokenizers")

# Pieces that stress the pre-tokenizer's pattern and the added-token cut: whitespace runs and kinds, contractions in
# both cases, digit runs, punctuation, combining marks, CJK, no-break space, line separators, control characters
# whose \s membership differs between regex engines, added tokens and the texts near them.
PARTS = ["\n", "\n\n", " ", "  ", "   ", "\t", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1f", "\x85", "\u00a0", "\u2028",
         "\u3000", "A", "b", "Zz", "Q", "I", "'s", "'S", "'ll", "'LL", "'re", "'ve", "'M", "'d", "'", "''", "1", "23",
         "456", "7890", "3.14", "1,000", "-", "!", "?", ".", ":", "(A)", "[b]", "{", "$", "#", "@", "~", "`", "<", ">",
         "|", "\u00e9", "e\u0301", "\u0301", "\u4e2d\u6587", "\u0661\u0662", "\u00bd", "\u2460", "\U0001f600", "\x00",
         "<|im_end|>", "<|im_start|>", "<|video_pad|>", "<|image_pad|>", "<|vision_start|>", "<think>", "</think>",
         "<|im_end", "|>", "Question:", "Answer with the letter.", " red", " (12)"]


PLAIN = ["\t", "\n", "\r", *map(chr, range(0x20, 0x7F))]
WORDS = ["Question", "A.", "(B)", "it's", "I'LL", "12", "3456", "?", "!!", ":", "\n", "\n\n", "\t", "x\n", "'s", "<b>"]


@pytest.fixture(scope="module")
def qwen3() -> PromptCounter:
    ref = models.resolve("tiny-qwen3-vl")
    return PromptCounter(ref.path, ref.family)


def _check_counts(counter: TextCounter, texts: list[str]) -> int:
    """Every count is the tokenizer's; a text left uncounted holds a watched id. Returns how many were counted."""
    whole = [e.ids for e in counter.backend.encode_batch_fast(texts, add_special_tokens=False)]
    counted = 0
    for text, n, ids in zip(texts, counter.counts(texts), whole):
        if n is None:
            assert counter._watched.intersection(ids), text
        else:
            assert n == len(ids), text
            counted += 1
    return counted


def test_text_counts_are_the_tokenizers(qwen3: PromptCounter) -> None:
    counter = qwen3._text_counter()
    assert counter is not None
    rnd = random.Random(11)
    texts = ["".join(rnd.choice(PARTS) for _ in range(rnd.randint(0, 40))) for _ in range(4000)]
    texts += [f"Question {i}: which colour?\nA. red ({i})\nB. it's {i * 7919}\n\nThe best answer is:"
              for i in range(300)]
    # Texts of words and single spaces (counted word by word), with any ending.
    texts += [" ".join(rnd.choice(WORDS) for _ in range(rnd.randint(1, 12))) + rnd.choice(["", " ", "\n", " \n"])
              for _ in range(3000)]
    assert _check_counts(counter, texts) > len(texts) // 2  # the rest hold a placeholder's text
    assert _check_counts(counter, texts) > len(texts) // 2  # again, from the remembered lines and pieces


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.lists(st.sampled_from(PARTS), max_size=30).map("".join) | st.text(max_size=60)
       | st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=127), max_size=80)
       | st.text(alphabet=st.sampled_from(PLAIN), max_size=80)
       | st.lists(st.sampled_from(WORDS), max_size=25).map(" ".join))
def test_any_text_counts_as_the_tokenizer_says(qwen3: PromptCounter, text: str) -> None:
    counter = qwen3._text_counter()
    assert counter is not None
    _check_counts(counter, [text, text + "\n" + text, "\n" + text + "\n"])


# Prompts as the benchmark templates render them, and awkward ones: edges of whitespace, added tokens' texts,
# non-ASCII, an empty text.
PROMPTS = ["Select the best answer.\nQuestion 3: which colour?\nA. red (3)\nB. green (3)\nThe best answer is:",
           "\nQuestion: what?\nA: one\nB: two\n\nDo not generate any intermediate reasoning process.\n", "",
           " leading and trailing ", "caf\u00e9 e\u0301 \u4e2d\u6587\n\u00a0x", "a <|video_pad|> inside",
           "<|vision_start|><|video_pad|><|vision_end|> again", "<|im_end|>\n<|im_start|>assistant\n", "'s 's 'S\n\n\n",
           "<think>\nreasoning\n</think>\n\nanswer", "x\x1c\x0by\r\n z", "\n", "  ", "12345 67 8", "A ", "A.\nB: x "]


@pytest.mark.parametrize("tiny", [f.tiny_model for f in families.registry().values()])
def test_prompt_counts_are_whole_prompt_counts_for_every_family(tiny: str) -> None:
    """`counts` (frame + text counts where the frame is cut off by added tokens) against rendering each prompt
    through the processor's chat template and tokenizing it with the processor's own tokenizer."""
    ref = models.resolve(tiny)
    counter = PromptCounter(ref.path, ref.family)
    rnd = random.Random(5)
    prompts = PROMPTS + ["".join(rnd.choice(PARTS) for _ in range(rnd.randint(1, 25))) for _ in range(300)]
    video = VideoGeometry(frames=4, height=64, width=96, indices=(0, 10, 20, 30), fps=10.0)
    layouts: list[tuple[list[VideoGeometry], list[tuple[int, int]]]] = [([video], []), ([], []), ([], [(64, 64)]),
                                                                       ([video], [(32, 64)])]
    for videos, images in layouts:
        items = [(p, videos, images) for p in prompts]
        got = counter.counts(items)
        for (prompt, _, _), count in zip(items, got):
            text = counter.processor.apply_chat_template(chat_messages(prompt, len(videos), len(images)),
                                                         tokenize=False, add_generation_prompt=True)
            ids = counter.tokenizer(text, add_special_tokens=True)["input_ids"]
            assert count == counter.count_ids(ids, videos, images), (tiny, prompt, len(videos), len(images))
    if ref.family.startswith("qwen"):  # the Qwen templates cut the text off with added tokens: the shortcut is taken
        assert counter._frame_tokens(1, 0) is not None and counter._text_counter() is not None


def test_tokenizers_or_frames_it_cannot_vouch_for_get_no_shortcut(qwen3: PromptCounter) -> None:
    from tokenizers import normalizers, pre_tokenizers, processors

    backend = Path(models.resolve("tiny-qwen3-vl").path) / "tokenizer.json"
    watched = {*qwen3.video_target, qwen3.image_id}
    tok = tokenizers.Tokenizer.from_file(str(backend))
    assert TextCounter.of(tok, watched) is not None
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    assert TextCounter.of(tok, watched) is None
    tok = tokenizers.Tokenizer.from_file(str(backend))
    tok.normalizer = normalizers.Lowercase()
    assert TextCounter.of(tok, watched) is None
    tok = tokenizers.Tokenizer.from_file(str(backend))
    tok.post_processor = processors.TemplateProcessing(single="<|im_start|> $A", special_tokens=[
        ("<|im_start|>", tok.token_to_id("<|im_start|>"))])
    assert TextCounter.of(tok, watched) is None
    tok = tokenizers.Tokenizer.from_file(str(backend))
    tok.enable_truncation(8)
    assert TextCounter.of(tok, watched) is None
    tok = tokenizers.Tokenizer.from_file(str(backend))
    image_in_vocab = tok.token_to_id("A")  # a watched id that plain text can produce
    assert TextCounter.of(tok, {*watched, image_in_vocab}) is None
    # A frame whose halves are plain text next to the prompt (no added token at the cut), or one whose added token
    # could run on into the text: the prompt is tokenized whole.
    target, image = qwen3.video_target, qwen3.image_id
    before, after = "<|im_start|>user\n<|vision_start|><|video_pad|><|vision_end|>", "<|im_end|>\n<|im_start|>a\n"
    assert frame_tokens(tok, before, after, target, image) is not None
    assert frame_tokens(tok, "<|im_start|>user\n", after, target, image) is None
    assert frame_tokens(tok, before, "\n<|im_end|>", target, image) is None
    tok.add_special_tokens(["<|vision_end|>!"])
    assert frame_tokens(tok, before, after, target, image) is None


def test_the_llama3_pattern_counts_digits_in_threes(qwen3: PromptCounter) -> None:
    """The other accepted split pattern (\\p{N}{1,3}, the Llama-3 / GLM-4 kind) on the same vocabulary: counts are
    the tokenizer's, and digits are not all counted as 0 (a run of three is one piece, its tokens depend on it)."""
    from tokenizers import Regex, pre_tokenizers

    from vbench_async.workload.counts import _ASCII_PATTERNS

    pattern = next(p for p in _ASCII_PATTERNS if "{1,3}" in p)
    tok = tokenizers.Tokenizer.from_file(str(Path(models.resolve("tiny-qwen3-vl").path) / "tokenizer.json"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    counter = TextCounter.of(tok, {*qwen3.video_target, qwen3.image_id})
    assert counter is not None and counter._digits is None
    rnd = random.Random(13)
    texts = ["".join(rnd.choice(PARTS) for _ in range(rnd.randint(0, 30))) for _ in range(2000)]
    texts += [f"Question {i}: {i * 7919} or {i}?\nA. {i}.5 ({i})" for i in range(0, 100000, 97)]
    assert _check_counts(counter, texts) > len(texts) // 2

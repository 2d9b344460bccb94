"""A small byte-level BPE tokenizer with the Qwen special tokens, and the Qwen-VL chat templates.

Trained locally on generated sentences in the vocabulary of video questions and answers, so a tiny model needs no
hub download. Training is deterministic for a fixed corpus, which the seeded generator guarantees.
"""

from __future__ import annotations

import json
import random
from typing import Any

# Same order as the real Qwen2/2.5/3-VL tokenizers (they sit after the BPE vocabulary there too).
SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
# Plain added tokens (not special: they survive skip_special_tokens), as in Qwen3's tokenizer.
THINK_TOKENS = ("<think>", "</think>")

BPE_VOCAB_SIZE = 1024

_WORDS = {
    "subject": ["the red circle", "a blue square", "the green triangle", "a yellow diamond", "the person",
                "the white shape", "the purple circle", "an orange square", "the cyan triangle", "the text"],
    "verb": ["moves to the left", "moves to the right", "moves up", "moves down", "appears", "disappears",
             "flashes", "is visible", "turns on a light", "opens the door", "picks up a cup", "walks away"],
    "question": ["What color is", "Which shape is", "How many times does", "When does", "Where is", "Is there",
                 "What text is shown in", "In which direction does", "What happens after", "Why does"],
    "tail": ["in the video?", "on the screen?", "at the end?", "during the clip?", "first?", "again?"],
    "instruction": [
        "Answer with the option's letter from the given choices directly.",
        "Please answer yes or no.",
        "Please provide the start and end time in seconds as JSON.",
        "Please find the corresponding time period in the video.",
        "Please describe the location of the corresponding subject/object in this video.",
        "Select the best answer to the following multiple-choice question based on the video.",
        "Output the thinking process in <think> </think> and the final answer in <answer> </answer> tags.",
        "Therefore, the final answer is:",
        "The best answer is:",
    ],
}


def _answer(rng: random.Random) -> str:
    kind = rng.randrange(6)
    if kind == 0:
        return f"<answer>{rng.choice('ABCDEFGHIJ')}</answer>"
    if kind == 1:
        return f"<answer>{rng.randrange(0, 100)}</answer>"
    if kind == 2:
        s = round(rng.uniform(0, 60), rng.choice((0, 1, 2)))
        return "<answer>" + json.dumps({"time": [s, round(s + rng.uniform(0.5, 20), 1)]}) + "</answer>"
    if kind == 3:
        x, y = rng.randrange(320), rng.randrange(180)
        box = [x, y, x + rng.randrange(8, 60), y + rng.randrange(8, 60)]
        return "<answer>" + json.dumps({"time": [1, 3], "boxes": {str(rng.randrange(60)): box}}) + "</answer>"
    if kind == 4:
        return f"<answer>{rng.choice(['Yes', 'No', 'yes', 'no'])}</answer>"
    return f"{rng.choice('ABCD')}. {rng.choice(_WORDS['subject'])} {rng.choice(_WORDS['verb'])}."


def training_corpus(n: int = 3000, seed: int = 0) -> list[str]:
    """Sentences shaped like prompts and answers of the demo and real benchmarks (deterministic for a seed)."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        q = f"{rng.choice(_WORDS['question'])} {rng.choice(_WORDS['subject'])} {rng.choice(_WORDS['tail'])}"
        lines.append(f"{q}\n{rng.choice(_WORDS['instruction'])}\n{_answer(rng)}")
        lines.append(f"{rng.choice(_WORDS['subject']).capitalize()} {rng.choice(_WORDS['verb'])} at "
                     f"{rng.uniform(0, 60):.1f} seconds.")
    return lines


def build_tokenizer(seed: int = 0) -> Any:
    """Train the BPE and wrap it as a transformers `Qwen2Tokenizer` (eos `<|im_end|>`, pad `<|endoftext|>`)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import AddedToken, Qwen2Tokenizer
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated"),
         pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
    )
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=BPE_VOCAB_SIZE, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    bpe.train_from_iterator(training_corpus(seed=seed), trainer=trainer)
    model = json.loads(bpe.to_str())["model"]
    # tokenizers 0.23 wants merges as pairs; its JSON may hold either pairs or "a b" strings.
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ", 1)) for m in model["merges"]]
    vocab = dict(model["vocab"])
    for t in SPECIAL_TOKENS + THINK_TOKENS:  # fixed ids right after the BPE vocabulary, in Qwen's order
        vocab[t] = len(vocab)
    tok = Qwen2Tokenizer(
        vocab=vocab, merges=merges, unk_token=None, bos_token=None,
        eos_token="<|im_end|>", pad_token="<|endoftext|>",
    )
    tok.add_special_tokens(
        {"additional_special_tokens": [AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS]}
    )
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in THINK_TOKENS])
    tok.model_max_length = 32768
    return tok


def chat_template(default_system: str | None, bare_video_pad: bool) -> str:
    """A Qwen-VL chat template (handles string content and lists of image/video/text parts).

    Qwen3-VL processors in transformers 5 (and vLLM) expand a bare `<|video_pad|>` into per-frame
    `<t seconds><|vision_start|>...<|vision_end|>` groups, so that family must not wrap it again.
    """
    video = "<|video_pad|>" if bare_video_pad else "<|vision_start|><|video_pad|><|vision_end|>"
    system = (
        "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\n"
        f"{default_system}<|im_end|>\n{{% endif %}}"
        if default_system else ""
    )
    return (
        "{% for message in messages %}"
        + system
        + "<|im_start|>{{ message['role'] }}\n"
        "{% if message['content'] is string %}{{ message['content'] }}"
        "{% else %}{% for part in message['content'] %}"
        "{% if part['type'] == 'image' or 'image' in part or 'image_url' in part %}"
        "<|vision_start|><|image_pad|><|vision_end|>"
        "{% elif part['type'] == 'video' or 'video' in part or 'video_url' in part %}"
        + video
        + "{% elif 'text' in part %}{{ part['text'] }}"
        "{% endif %}{% endfor %}{% endif %}"
        "<|im_end|>\n"
        "{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )

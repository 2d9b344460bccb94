"""FFmpeg's error codes in words: PyAV writes its errors as "[Errno 1094995529] Invalid data found when processing
input: 'x.mp4'", and that number (FFmpeg's AVERROR_INVALIDDATA, the tag 'INDA') means nothing to a user."""

from __future__ import annotations

import re


def _tag(text: str) -> int:
    """FFmpeg's FFERRTAG: four bytes, little-endian (PyAV reports the negated AVERROR, a positive number)."""
    return int.from_bytes(text.encode("latin-1"), "little")


# AVERROR tag -> (name, what it means for a video file), for the codes a decoder meets.
AVERRORS: dict[int, tuple[str, str]] = {
    _tag("INDA"): ("INVALIDDATA", "invalid data: the file is damaged, cut short, or not a video FFmpeg can read"),
    _tag("EOF "): ("EOF", "the file ended before the video did (cut short?)"),
    _tag("\xf8DEC"): ("DECODER_NOT_FOUND", "no decoder for the video's codec in this FFmpeg build"),
    _tag("\xf8DEM"): ("DEMUXER_NOT_FOUND", "the container format is unknown to this FFmpeg build"),
    _tag("\xf8STR"): ("STREAM_NOT_FOUND", "the file holds no stream FFmpeg can read"),
    _tag("\xf8PRO"): ("PROTOCOL_NOT_FOUND", "FFmpeg cannot open this kind of path or URL"),
    _tag("\xf8OPT"): ("OPTION_NOT_FOUND", "FFmpeg was given an option it does not know"),
    _tag("\xf8BSF"): ("BSF_NOT_FOUND", "a bitstream filter the file needs is missing from this FFmpeg build"),
    _tag("PAWE"): ("PATCHWELCOME", "the file uses a feature FFmpeg does not implement"),
    _tag("BUG!"): ("BUG", "FFmpeg hit an internal error on this file"),
    _tag("BUG "): ("BUG2", "FFmpeg hit an internal error on this file"),
    _tag("UNKN"): ("UNKNOWN", "FFmpeg reported an unknown error (often an external library's)"),
    _tag("EXT "): ("EXTERNAL", "an external library failed while reading the file"),
    _tag("EXIT"): ("EXIT", "FFmpeg was asked to stop"),
}

# "[Errno N] what PyAV says" up to the file name PyAV appends (": 'x.mp4'") or the end
_ERRNO = re.compile(r"\[Errno (-?\d+)\] ?([^:\n]*)")


def code_in_words(code: int) -> str | None:
    """An FFmpeg error number as words (its meaning and AVERROR name), None for a number that is not FFmpeg's own
    (a system errno such as 2, which Python's "[Errno 2] No such file or directory" already says)."""
    known = AVERRORS.get(abs(code))
    if known is not None:
        return f"{known[1]} (FFmpeg {known[0]})"
    return f"an FFmpeg error with no name here (code {code})" if abs(code) >= 4096 else None


def in_words(message: str) -> str:
    """A decoder's message with each "[Errno N] ..." of an FFmpeg code in words; a system errno and the rest of the
    text (the file name PyAV appends) stay as they are."""
    def words(m: re.Match[str]) -> str:
        said = code_in_words(int(m.group(1)))
        return said if said is not None else m.group(0)

    return _ERRNO.sub(words, message)

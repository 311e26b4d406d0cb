#!/usr/bin/env python3
"""Writes the man page floodgate.toml(5) from docs/configuration.md, so that the page installed
with the package says exactly what the reference says (one source: the docs check keeps
configuration.md true to the code, and this keeps the man page true to configuration.md).

    scripts/gen_manpage.py docs/configuration.md OUT.5 [--version V]

The Markdown that configuration.md uses maps onto man(7) macros: `#` is the title, `##` a
section (.SH), `###` a subsection (.SS), paragraphs (.PP), lists (.IP), fenced code (.EX), and
each table row a tagged paragraph (.TP) whose tag is the first column and whose body names the
other columns. Inline `code` (and ``code with a ` in it``) is bold, *emphasis* italic,
**strong** bold, and a link [text](target) its text alone: a target in the documentation
(`resilience.md#keys`) is a file the page's SEE ALSO names; a web address is kept, in angle
brackets, after the text. Anything else is an error, so that a new construct in the docs cannot
turn into garbage in the page unnoticed: a `](` left over (a link this cannot read) is one."""

import argparse
import datetime
import os
import re
import sys


def escape(text):
    """Text as troff reads it literally: backslashes doubled, hyphens as minus signs, and every
    character beyond ASCII as its Unicode escape (troff reads its input as Latin-1: a "×" in
    UTF-8 would come out as two wrong characters)."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "".join(c if ord(c) < 128 else "\\[u%04X]" % ord(c) for c in text)


INLINE = re.compile(r"``(.+?)``|`([^`]+)`|\[((?:`[^`]*`|[^\]`])+)\]\(([^)\s]+)\)|"
                    r"\*\*(.+?)\*\*|\*([^*\s][^*]*?)\*")


def plain_text(text):
    """Text outside any markup: escaped, and never the remains of a link."""
    if "](" in text:
        raise ValueError("a link the man page cannot show: %r" % text)
    return escape(text)


def inline(text):
    """Markdown inline markup as troff font changes; the rest escaped."""
    out = []
    pos = 0
    for m in INLINE.finditer(text):
        out.append(plain_text(text[pos:m.start()]))
        code, link, target = m.group(1) or m.group(2), m.group(3), m.group(4)
        if code is not None:
            out.append("\\fB" + escape(code.strip() if m.group(1) else code) + "\\fR")
        elif link is not None:
            # The reader of a man page cannot follow a link: the text stays, a document's name
            # or section is in it already, and a web address is written out.
            out.append(inline(link))
            if re.match(r"[a-z]+://", target):
                out.append(" <" + escape(target) + ">")
        elif m.group(5) is not None:
            out.append("\\fB" + inline_plain(m.group(5)) + "\\fR")
        else:
            out.append("\\fI" + inline_plain(m.group(6)) + "\\fR")
        pos = m.end()
    out.append(plain_text(text[pos:]))
    return "".join(out)


def inline_plain(text):
    """Inside a font change: code spans lose their backticks, nothing nests further."""
    return escape(text.replace("`", ""))


def line(text):
    """One output line of running text: a leading dot or quote would be read as a request."""
    return "\\&" + text if text.startswith((".", "'")) else text


def split_row(row):
    """The cells of a Markdown table row; `\\|` inside a cell is a literal bar."""
    cells = re.split(r"(?<!\\)\|", row.strip().strip("|"))
    return [c.strip().replace("\\|", "|") for c in cells]


def convert(markdown, version, date):
    lines = markdown.splitlines()
    if not lines or not lines[0].startswith("# "):
        raise ValueError("line 1: the file must start with a '# ' title")
    out = [
        '.TH FLOODGATE.TOML 5 "%s" "floodgate %s" "File Formats"' % (date, version),
        ".SH NAME",
        "floodgate.toml \\- configuration file of the floodgate HTTP reverse proxy",
        ".SH DESCRIPTION",
    ]
    paragraph = []
    i = 1

    def flush():
        if paragraph:
            out.append(".PP")
            out.append(line(inline(" ".join(paragraph))))
            paragraph.clear()

    while i < len(lines):
        text = lines[i]
        number = i + 1
        stripped = text.strip()
        if not stripped:
            flush()
            i += 1
        elif text.startswith("```"):
            flush()
            out += [".PP", ".EX"]
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                out.append(line(escape(lines[i])))
                i += 1
            if i == len(lines):
                raise ValueError("line %d: a code block that does not end" % number)
            out.append(".EE")
            i += 1
        elif text.startswith("### "):
            flush()
            out.append(".SS " + inline(text[4:].strip()))
            i += 1
        elif text.startswith("## "):
            flush()
            out.append(".SH " + inline(text[3:].strip()))
            i += 1
        elif text.startswith("#"):
            raise ValueError("line %d: only ## and ### headings may follow the title" % number)
        elif text.startswith("|"):
            flush()
            header = split_row(text)
            if i + 1 >= len(lines) or not re.fullmatch(r"\|[\s:|-]+\|", lines[i + 1].strip()):
                raise ValueError("line %d: a table needs a |---| line under its header" % number)
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                cells = split_row(lines[i])
                if len(cells) != len(header):
                    raise ValueError("line %d: %d cells, the header has %d" %
                                     (i + 1, len(cells), len(header)))
                out += [".TP", inline(cells[0])]
                # A key table ends with "Meaning", written out as running text after the
                # other columns; any other table names every column.
                plain = header[-1] == "Meaning"
                named = list(zip(header[1:-1], cells[1:-1])) if plain else list(
                    zip(header[1:], cells[1:]))
                details = inline("; ".join("%s: %s" % (h, c) for h, c in named if c))
                if plain:
                    details = (details + ". " if details else "") + inline(cells[-1])
                out.append(line(details))
                i += 1
        elif re.match(r"(-|\d+\.) ", stripped) and not text.startswith(" "):
            flush()
            marker, item = stripped.split(" ", 1)
            tag = "\\(bu" if marker == "-" else marker
            words = [item]
            i += 1
            while i < len(lines) and lines[i].startswith("  ") and lines[i].strip():
                words.append(lines[i].strip())
                i += 1
            out += ['.IP "%s" 4' % tag, line(inline(" ".join(words)))]
        elif text.startswith("    "):
            flush()
            out += [".PP", ".EX"]
            while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                if not lines[i].strip() and (i + 1 == len(lines) or
                                             not lines[i + 1].startswith("    ")):
                    break
                out.append(line(escape(lines[i][4:])))
                i += 1
            out.append(".EE")
        else:
            paragraph.append(stripped)
            i += 1
    flush()
    out += [
        ".SH SEE ALSO",
        "\\fBfloodgate\\fR(8)",
        ".PP",
        "This page is the reference installed as /usr/share/doc/floodgate/configuration.md; "
        "the documents it refers to (operations.md, resilience.md, metrics.md, http.md) are "
        "beside it there.",
    ]
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source")
    ap.add_argument("output")
    ap.add_argument("--version", default="")
    args = ap.parse_args()
    # The page's date: the source's modification time, or SOURCE_DATE_EPOCH (reproducible builds).
    stamp = int(os.environ.get("SOURCE_DATE_EPOCH", os.path.getmtime(args.source)))
    date = datetime.datetime.fromtimestamp(stamp, datetime.timezone.utc).strftime("%Y-%m-%d")
    with open(args.source, encoding="utf-8") as f:
        markdown = f.read()
    try:
        page = convert(markdown, args.version, date)
    except ValueError as e:
        sys.exit("%s:%s" % (args.source, e))
    with open(args.output, "w", encoding="utf-8") as f:
        f.write(page)


if __name__ == "__main__":
    main()

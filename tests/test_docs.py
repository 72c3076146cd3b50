"""The docs stay short and linked: no page under docs/ passes 60,000 bytes (a lab notebook splits by
subject instead), and every relative link in README.md and docs/**/*.md names a file that exists
and, with a #anchor, a heading of that file (GitHub's slugs)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^()\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def unfenced(text: str) -> str:
    """The text outside fenced code blocks, where headings are headings."""
    return re.sub(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$", "", text, flags=re.S | re.M)


def prose(text: str) -> str:
    """The text outside fenced code blocks and inline code spans, where links are links."""
    return re.sub(r"(`+).+?\1", "", unfenced(text), flags=re.S)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: its text lowercased, punctuation but '-' and '_' dropped,
    spaces to '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of a page's headings, a repeated one numbered -1, -2, ... as GitHub numbers it."""
    seen: dict[str, int] = {}
    for heading in re.findall(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t#]*$", unfenced(page.read_text(encoding="utf-8")),
                              flags=re.M):
        base = slug(heading)
        seen[base if base not in seen else f"{base}-{seen[base]}"] = 0
        seen[base] = seen.get(base, 0) + 1
    return set(seen)


def links(page: Path) -> list[str]:
    """The relative links (and images) of a page: no scheme, no mail address."""
    return [target for target in LINK.findall(prose(page.read_text(encoding="utf-8")))
            if not re.match(r"[a-z][a-z0-9+.-]*:", target, flags=re.I)]


def broken(page: Path) -> list[str]:
    """The links of `page` that name no file, or no heading of the file they name."""
    wrong = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        where = (page.parent / path).resolve() if path else page
        if not where.exists():
            wrong.append(f"{target} (no such file)")
        elif anchor and where.suffix == ".md" and anchor not in anchors(where):
            wrong.append(f"{target} (no heading #{anchor} in {where.relative_to(ROOT).as_posix()})")
    return wrong


def test_the_slug_rule_is_githubs():
    assert slug("Spanish → English, Bible corpus, 2-core CPU") == "spanish--english-bible-corpus-2-core-cpu"
    assert slug("Does `precision = \"auto\"` choose right? (benchmarks/precision.py)") == \
        "does-precision--auto-choose-right-benchmarksprecisionpy"
    assert slug("The demo's model_dir [guide](x.md)") == "the-demos-model_dir-guide"
    assert links(ROOT / "README.md")  # not vacuous


def test_no_docs_page_passes_60_kb():
    """A page over 60,000 bytes splits by subject (docs/results/, docs/experiments/, docs/benchmarks/)."""
    big = {page.relative_to(ROOT).as_posix(): size for page in (ROOT / "docs").rglob("*.md")
           if (size := len(page.read_bytes())) > 60_000}
    assert not big, f"over 60,000 bytes, split by subject: {big}"


def test_every_relative_link_resolves():
    wrong = {page.relative_to(ROOT).as_posix(): found for page in PAGES if (found := broken(page))}
    assert not wrong, f"links to no file or no heading: {wrong}"

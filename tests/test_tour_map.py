"""The source map in docs/tour.md does not go stale: every module of the library is named there once, in its
folder's entry, and every name there is a module that exists."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "relaxep"
TOUR = (ROOT / "docs" / "tour.md").read_text()
BLOCK = re.search(r"## Layout\n.*?```\n(src/relaxep/\n.*?)```", TOUR, flags=re.S).group(1)


def _entries() -> dict[str, str]:
    """The map's text by folder ("" for the package's own modules), from its indented entries."""
    entries: dict[str, str] = {}
    current = None
    for line in BLOCK.splitlines()[1:]:
        head = re.match(r"  (\S+)", line)
        if head:  # a new entry: "  folder/   text" or "  module.py   text"
            name = head.group(1)
            current = name.rstrip("/") if name.endswith("/") else ""
            text = line[len(head.group(0)) :] if name.endswith("/") else line
            entries[current] = entries.get(current, "") + " " + text
        elif current is not None:
            entries[current] += " " + line
    return entries


def _modules(folder: Path) -> set[str]:
    return {p.name for p in folder.glob("*.py") if p.name != "__init__.py"}


def _named(text: str) -> list[str]:
    return re.findall(r"(?<![\w/.])(\w+\.py)\b", text)


def test_every_module_is_named_once_in_its_folders_entry():
    entries = _entries()
    folders = sorted(p for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    missing, twice = [], []
    for folder in folders:
        rel = folder.name
        text = entries.get(rel, "")
        names = _named(text)
        for sub in sorted(p for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").exists()):
            if f"{sub.name}/" not in text:
                missing.append(f"{rel}/{sub.name}/")
            missing += [f"{rel}/{sub.name}/{m}" for m in sorted(_modules(sub)) if f"{sub.name}/{m}" not in text]
        for module in sorted(_modules(folder)):
            count = names.count(module)
            if count == 0:
                missing.append(f"{rel}/{module}")
            elif count > 1:
                twice.append(f"{rel}/{module}")
    top = _named(entries.get("", ""))
    missing += [m for m in sorted(_modules(PACKAGE)) if m not in top]
    assert not missing, f"modules missing from docs/tour.md's layout: {missing}"
    assert not twice, f"modules named more than once in their folder's entry: {twice}"


def test_every_module_the_map_names_exists():
    entries = _entries()
    stale = []
    for folder, text in entries.items():
        base = PACKAGE / folder if folder else PACKAGE
        stale += [f"{folder}/{n}" for n in _named(text) if not (base / n).exists() and not (PACKAGE / n).exists()]
    assert not stale, f"docs/tour.md's layout names modules that do not exist: {stale}"

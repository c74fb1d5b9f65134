"""`PresetTable`: what `keras_bert_zoo.list_presets()` returns, the registry's names that print as
a table of what each preset is (as keras-hub's preset pages and HF's model cards tell it)."""

COLUMNS = ("name", "params", "size", "L/H/A", "casing", "language", "source", "license")


def _number(value, units=("", "K", "M", "B")):
    """4_385_920 -> "4.4M"; 109_482_240 -> "109.5M" (as keras-hub lists parameters)."""
    for unit in units:
        if abs(value) < 1000 or unit == units[-1]:
            return f"{value:.1f}{unit}" if unit else f"{value:d}"
        value /= 1000


def _megabytes(size):
    return f"{size / 1e6:,.0f} MB" if size >= 1e7 else f"{size / 1e6:,.1f} MB"


class PresetTable(list):
    """The registry's preset names, sorted, printed as a table (`print(kbz.list_presets())`).

    A `list` of names, so `"bert_base_en_uncased" in kbz.list_presets()` and iteration work as
    before; `metadata` maps each name to `registry.preset_metadata(name)`. The size is that of
    the preset's float32 weights once converted (backbone plus the MLM and NSP heads), what the
    cache holds; the download (Google's zip) is about as large.

    Args:
        names: list of str. The preset names, in the order to list them.
        metadata: dict `{name: preset_metadata(name)}`.
    """

    def __init__(self, names, metadata):
        super().__init__(names)
        self.metadata = dict(metadata)

    def rows(self):
        """The table's rows (lists of str), `COLUMNS` first."""
        table = [list(COLUMNS)]
        for name in self:
            m = self.metadata[name]
            table.append([name, _number(m["params"]), _megabytes(m["size_bytes"]),
                          f"{m['num_layers']}/{m['hidden_dim']}/{m['num_heads']}",
                          "uncased" if m["lowercase"] else "cased", m["language"], m["source"], m["license"]])
        return table

    def __str__(self):
        rows = self.rows()
        widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
        right = {1, 2}  # numbers line up on the right
        lines = ["  ".join(cell.rjust(w) if i in right else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths)))
                 .rstrip() for row in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)

    __repr__ = __str__

"""``Metadata`` compares equal to another ``Metadata`` or a mapping with the same content, and to nothing else."""

from __future__ import annotations

from finalfusion.metadata import Metadata


def test_metadata_equals_same_content_as_mapping_or_metadata_only() -> None:
    meta = Metadata({"name": "x"})
    assert meta == {"name": "x"}
    assert meta != {"name": "y"}
    assert meta == Metadata({"name": "x"})
    assert meta != 3

"""Colours, markers and labels of the viewer: one place, so the legend and the glyphs agree.

Colours are plain hex strings (stored per row in the data sources, so tests and
tooltips can read them).  Faulty devices are red everywhere; everything else
avoids red so that a fault is never mistaken for something else.
"""

from __future__ import annotations

from fabric.model import DeviceKind

FAULT_COLOR = "#d62728"
FAULT_LINE = "#7f0000"
IDLE_COLOR = "#c7c7c7"  # healthy GPU in no TP group (stranded by faults or by rounding)
OUTLINE = "#333333"

KIND_COLORS = {
    DeviceKind.GPU: "#4c72b0",
    DeviceKind.NIC: "#64b5cd",
    DeviceKind.SWITCH_CHIP: "#8172b2",
    DeviceKind.TOR: "#55a868",
    DeviceKind.AGG: "#937860",
    DeviceKind.CORE: "#2f4b26",
    DeviceKind.OCS: "#dd8452",
}
KIND_MARKERS = {
    DeviceKind.GPU: "circle",
    DeviceKind.NIC: "circle",
    DeviceKind.SWITCH_CHIP: "diamond",
    DeviceKind.TOR: "square",
    DeviceKind.AGG: "square",
    DeviceKind.CORE: "hex",
    DeviceKind.OCS: "triangle",
}
KIND_NAMES = {
    DeviceKind.GPU: "GPU",
    DeviceKind.NIC: "NIC",
    DeviceKind.SWITCH_CHIP: "switch chip",
    DeviceKind.TOR: "ToR",
    DeviceKind.AGG: "aggregation switch",
    DeviceKind.CORE: "core / spine switch",
    DeviceKind.OCS: "OCS",
}

# TP groups cycle through a categorical palette without red (red means faulty)
# and without the grey of idle GPUs.
GROUP_PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf",
    "#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5",
)

# Link classes (index = class code in the edge tables).
LINK_CLASSES = ("HBD link", "DCN link", "OCS path (lit)", "skip hop (bypasses a node)",
                "OCS path (dark)", "OCS circuit")
HBD, DCN, LIT, SKIP, DARK, CIRCUIT = range(len(LINK_CLASSES))
# colour, width (px), alpha per class when colouring links by type
CLASS_STYLE = {
    HBD: ("#4c72b0", 1.0, 0.35),
    DCN: ("#8c8c8c", 1.0, 0.25),
    LIT: ("#2ca02c", 2.0, 0.9),
    SKIP: ("#ff7f0e", 3.0, 1.0),
    DARK: ("#bdbdbd", 1.0, 0.25),
    CIRCUIT: ("#9467bd", 1.5, 0.6),
}
MEDIUM_STYLE = {  # model.Medium code -> label, colour
    0: ("PCB", "#8c564b"),
    1: ("copper", "#e6a000"),
    2: ("fibre", "#1f77b4"),
}
# Utilisation bins (lower edges) with a yellow-to-red ramp (ColorBrewer YlOrRd);
# hot links are drawn wider so a single hot uplink stands out in a large fabric.
LOAD_EDGES = (0.0, 0.2, 0.4, 0.6, 0.8)
LOAD_COLORS = ("#fed976", "#feb24c", "#fd8d3c", "#f03b20", "#bd0026")
LOAD_WIDTHS = (1.0, 1.5, 2.0, 3.0, 4.0)
NO_LOAD = ("no load data", "#bdbdbd", 1.0, 0.3)

BOX_FILL = "#eeeeee"
BOX_LINE = "#bbbbbb"

LINK_COLORINGS = ("type", "medium", "load")

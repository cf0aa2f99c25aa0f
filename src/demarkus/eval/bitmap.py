"""An RGB bitmap with boxes and 5x7 bitmap text, saved as PNG with the stdlib (zlib + struct).

The charts need labels but the package has no plotting dependency; a fixed bitmap font
keeps the output byte-stable across machines, which a system font would not.
"""

from __future__ import annotations

import struct
import zlib

Color = tuple[int, int, int]

GLYPH_WIDTH, GLYPH_HEIGHT, GLYPH_ADVANCE = 5, 7, 6

# The classic 5x7 LCD font, printable ASCII from ' ' (0x20) to '~' (0x7e): five column
# bytes per glyph, bit 0 at the top.
_FONT_HEX = (
    "0000000000" "00005f0000" "0007000700" "147f147f14" "242a7f2a12" "2313086462" "3649552250" "0005030000"
    "001c224100" "0041221c00" "082a1c2a08" "08083e0808" "0050300000" "0808080808" "0060600000" "2010080402"
    "3e5149453e" "00427f4000" "4261514946" "2141454b31" "1814127f10" "2745454539" "3c4a494930" "0171090503"
    "3649494936" "064949291e" "0036360000" "0056360000" "0008142241" "1414141414" "4122140800" "0201510906"
    "3249794136" "7e1111117e" "7f49494936" "3e41414122" "7f4141221c" "7f49494941" "7f09090101" "3e41415132"
    "7f0808087f" "00417f4100" "2040413f01" "7f08142241" "7f40404040" "7f0204027f" "7f0408107f" "3e4141413e"
    "7f09090906" "3e4151215e" "7f09192946" "4649494931" "01017f0101" "3f4040403f" "1f2040201f" "7f2018207f"
    "6314081463" "0304780403" "6151494543" "00007f4141" "0204081020" "41417f0000" "0402010204" "4040404040"
    "0001020400" "2054545478" "7f48444438" "3844444420" "384444487f" "3854545418" "087e090102" "081454543c"
    "7f08040478" "00447d4000" "2040443d00" "007f102844" "00417f4000" "7c04180478" "7c08040478" "3844444438"
    "7c14141408" "081414187c" "7c08040408" "4854545420" "043f444020" "3c4040207c" "1c2040201c" "3c4030403c"
    "4428102844" "0c5050503c" "4464544c44" "0008364100" "00007f0000" "0041360800" "08082a1c08"
)
_FONT = {chr(0x20 + i): bytes.fromhex(_FONT_HEX[i * 10:(i + 1) * 10]) for i in range(len(_FONT_HEX) // 10)}


def text_width(text: str, scale: int = 1) -> int:
    """Pixels the text spans (no trailing gap)."""
    return max(len(text) * GLYPH_ADVANCE - 1, 0) * scale


class Bitmap:
    """A width x height RGB canvas; drawing outside it is clipped."""

    def __init__(self, width: int, height: int, background: Color = (255, 255, 255)) -> None:
        self.width, self.height = width, height
        self._rows = [bytearray(bytes(background) * width) for _ in range(height)]

    def pixel(self, x: int, y: int) -> Color:
        row = self._rows[y]
        return row[3 * x], row[3 * x + 1], row[3 * x + 2]

    def fill(self, x0: int, y0: int, x1: int, y1: int, color: Color) -> None:
        """Fill the box [x0, x1) x [y0, y1)."""
        x0, x1 = max(x0, 0), min(x1, self.width)
        if x1 <= x0:
            return
        run = bytes(color) * (x1 - x0)
        for y in range(max(y0, 0), min(y1, self.height)):
            self._rows[y][3 * x0:3 * x1] = run

    def text(self, x: int, y: int, text: str, color: Color, *, scale: int = 1, vertical: bool = False) -> None:
        """Draw `text` with its top-left corner at (x, y); vertical text reads bottom to top,
        starting at (x, y) as its bottom-left corner. Unknown characters print as '?'."""
        for index, char in enumerate(text):
            columns = _FONT.get(char, _FONT["?"])
            for col, bits in enumerate(columns):
                for row in range(GLYPH_HEIGHT):
                    if not bits >> row & 1:
                        continue
                    along = (index * GLYPH_ADVANCE + col) * scale
                    if vertical:
                        px, py = x + row * scale, y - along - scale
                    else:
                        px, py = x + along, y + row * scale
                    self.fill(px, py, px + scale, py + scale, color)

    def png(self) -> bytes:
        """The canvas as an 8-bit RGB PNG (filter 0 on every row)."""
        raw = b"".join(b"\x00" + bytes(row) for row in self._rows)

        def chunk(kind: bytes, data: bytes) -> bytes:
            return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")

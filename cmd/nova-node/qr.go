package main

import (
	"strings"

	"rsc.io/qr"
)

// qrText renders text as a QR code for a terminal: two modules per
// character cell (half blocks), with a quiet zone. Dark modules are drawn,
// so on a dark terminal the code shows inverted, which phone cameras read.
func qrText(text string) (string, error) {
	code, err := qr.Encode(text, qr.L)
	if err != nil {
		return "", err
	}
	const quiet = 2
	n := code.Size
	dark := func(x, y int) bool {
		x, y = x-quiet, y-quiet
		return x >= 0 && y >= 0 && x < n && y < n && code.Black(x, y)
	}
	var b strings.Builder
	for y := 0; y < n+2*quiet; y += 2 {
		for x := 0; x < n+2*quiet; x++ {
			top, bottom := dark(x, y), dark(x, y+1)
			switch {
			case top && bottom:
				b.WriteString("█")
			case top:
				b.WriteString("▀")
			case bottom:
				b.WriteString("▄")
			default:
				b.WriteString(" ")
			}
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}

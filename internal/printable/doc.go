// Package printable renders text a confined command chose — file names,
// file contents, command lines — for a person to read on a terminal or in a
// client's prompt, so that the text cannot hide part of itself or take over
// the display.
//
// It owns one rule, used wherever such text is shown (the CLI's denial
// lines, a transaction's diff, the MCP server's approval prompt): control
// characters (C0, DEL, C1: terminal escape sequences, carriage returns, the
// 8-bit CSI), the Unicode bidirectional controls that reorder what is
// displayed, and bytes that are not UTF-8 are written as Go-style escapes
// (\x1b, \u202e). It never drops or shortens text, and must never be used
// where the text is data for a program (JSON fields, paths passed on):
// there the raw value is the truth.
package printable

// Package interrupt instruments a WebAssembly module binary so that the host
// can stop a runaway call cheaply. Every function body and every loop body
// starts by counting down an injected global; every CheckInterval function
// entries and loop iterations (the slow path) it
// executes `memory.grow 0`, then reads a second injected, exported, mutable
// i32 global — the interrupt flag — and traps (unreachable) when it is
// non-zero. The host sets the flag (wazero's api.MutableGlobal.Set) when a
// call's deadline passes.
//
// The `memory.grow 0` matters as much as the flag: wazero's compiled code
// has no Go safepoint, so a guest looping in native code would block every
// stop-the-world of the Go runtime (each garbage collection) — and with it
// the very timer goroutine that is to set the flag. memory.grow leaves the
// native code for Go (wazero implements it in Go; growing by 0 pages
// changes nothing), which gives the scheduler a point to preempt the
// goroutine at least every CheckInterval iterations.
//
// This replaces wazero's RuntimeConfig.WithCloseOnContextDone(true), which
// makes the same trip into Go at every loop iteration (about 35–65 ns each).
// The fast path here is a load, a subtraction, a store and a branch. With
// the compiler engine (wazevo) a global.get at a loop header is a real load
// on every iteration: the loop header block is not sealed while its body is
// lowered, so the frontend's cached-value lookup (FindValueInLinearPath)
// fails and the load is emitted, and no later SSA pass hoists or merges
// loads.
//
// Setting the global from another goroutine while a call runs is what the
// compiler engine is meant for here: the compiled code reads the global's
// slot directly, outside the Go memory model. With wazero's interpreter the
// same Set is a Go data race (the interpreter reads the global in Go), so
// use the interrupt there only between calls, or keep CloseOnContextDone.
// After a trap the guest's own state (e.g. a Go runtime) may be broken: the
// host should discard the instance, or at least set the global back to 0
// once the timer that sets it can no longer fire.
//
// The package depends on the standard library only.
package interrupt

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Section ids of the binary format.
const (
	secCustom    = 0
	secImport    = 2
	secFunction  = 3
	secMemory    = 5
	secGlobal    = 6
	secExport    = 7
	secCode      = 10
	secDataCount = 12
	secTag       = 13
)

// sectionRank gives the position each known non-custom section must have in
// a module (a strictly increasing sequence). Zero means unknown.
var sectionRank = [14]int{
	1:  1,  // type
	2:  2,  // import
	3:  3,  // function
	4:  4,  // table
	5:  5,  // memory
	13: 6,  // tag
	6:  7,  // global
	7:  8,  // export
	8:  9,  // start
	9:  10, // element
	12: 11, // datacount
	10: 12, // code
	11: 13, // data
}

// CheckInterval is how many loop iterations run between two visits of the
// slow path (a trip into Go and a look at the interrupt flag).
const CheckInterval = 1024

// newGlobalEntries are the appended globals: the interrupt flag, a mutable
// i32 initialised by `i32.const 0; end`, then the countdown, a mutable i32
// initialised by `i32.const CheckInterval; end`.
var newGlobalEntries = [...]byte{
	0x7f, 0x01, 0x41, 0x00, 0x0b,
	0x7f, 0x01, 0x41, 0x80, 0x08, 0x0b, // sleb128(1024) = 0x80 0x08
}

// newGlobalCount is the number of globals Instrument appends.
const newGlobalCount = 2

const (
	exportKindGlobal = 0x03
	debugPrefix      = ".debug"
	maxCheckLen      = 64 // the check sequence with 5-byte global indices
)

// errTruncated reports a read past the end of the enclosing unit (a section
// or a function body).
var errTruncated = errors.New("unexpected end of input")

// section is one section of the input, located by byte offsets.
type section struct {
	id         byte
	start      int // offset of the id byte
	contentPos int // offset of the first content byte
	end        int // offset just past the content
	drop       bool
}

// moduleInfo is what Instrument learns about its input in the scanning pass.
type moduleInfo struct {
	sections        []section
	importedGlobals uint32
	definedGlobals  uint32
	memories        uint64 // imported and defined
	funcCount       uint32 // entries in the function section
	codeCount       uint32 // entries in the code section
	loops           []int  // input offsets of the check points, ascending: each function's first instruction and just after each loop's block type
	exportName      string
}

// Instrument returns a copy of the WebAssembly module binary wasm with two
// more mutable i32 globals — the interrupt flag (initial value 0), exported
// under exportName, and a countdown (initial value CheckInterval), not
// exported — and the check of checkSequence inserted at the start of every
// function body (after its locals) and of every loop body. Setting the
// flag to a non-zero value makes the guest trap with "unreachable" within
// CheckInterval function entries and loop iterations, so a runaway loop and
// a runaway recursion (which wazero's own termination check, placed at loop
// headers only, does not stop) are both stopped. The module must have a
// memory (the check uses memory.grow).
//
// The new globals' indices follow the imported and defined globals, so no
// existing index moves. The global and export sections are created in
// their proper place when absent. Branch depths are relative, so the
// inserted `if … end` blocks shift no label. Custom sections whose name
// starts with ".debug" are dropped (DWARF code offsets would be wrong);
// other custom sections are kept unchanged and in place.
//
// Instrument decodes every instruction (MVP, sign extension, saturating
// truncation, bulk memory, reference types, multi-memory, SIMD incl. relaxed
// SIMD, threads, exception handling incl. the legacy encoding, typed function
// references) but does not validate types; an instrumented valid module is
// valid. It returns an error, and never panics, for input that is truncated,
// malformed, uses an unknown opcode, has no memory or already exports
// exportName. wasm is not modified. Instrument is safe for concurrent use.
func Instrument(wasm []byte, exportName string) ([]byte, error) {
	if !utf8.ValidString(exportName) {
		return nil, fmt.Errorf("interrupt: export name %q is not valid UTF-8", exportName)
	}
	m := moduleInfo{exportName: exportName}
	if err := m.scan(wasm); err != nil {
		return nil, fmt.Errorf("interrupt: %w", err)
	}
	if m.memories == 0 {
		return nil, errors.New("interrupt: the module has no memory (the check needs memory.grow)")
	}
	globalIndex := uint64(m.importedGlobals) + uint64(m.definedGlobals)
	if globalIndex+newGlobalCount >= 0xffffffff {
		return nil, errors.New("interrupt: too many globals")
	}
	// Every size field of the output is at most the output's length.
	growth := uint64(len(m.loops))*maxCheckLen + uint64(m.codeCount) + uint64(len(exportName)) + 64
	if uint64(len(wasm))+growth > 0xffffffff {
		return nil, errors.New("interrupt: module too large")
	}
	check := checkSequence(uint32(globalIndex), uint32(globalIndex)+1)
	return m.emit(wasm, uint32(globalIndex), check), nil
}

// checkSequence returns the code inserted at the start of every function
// and loop body,
// for the interrupt flag global f and the countdown global c:
//
//	global.get c; i32.const 1; i32.sub; global.set c
//	global.get c; i32.eqz
//	if
//	  i32.const CheckInterval; global.set c
//	  i32.const 0; memory.grow 0; drop
//	  global.get f
//	  if; unreachable; end
//	end
//
// It leaves the operand stack as it found it.
func checkSequence(f, c uint32) []byte {
	b := make([]byte, 0, maxCheckLen)
	global := func(op byte, idx uint32) {
		b = append(b, op)
		b = appendU32(b, idx)
	}
	global(0x23, c)
	b = append(b, 0x41, 0x01, 0x6b) // i32.const 1; i32.sub
	global(0x24, c)
	global(0x23, c)
	b = append(b, 0x45, 0x04, 0x40) // i32.eqz; if (empty)
	b = append(b, 0x41, 0x80, 0x08) // i32.const CheckInterval
	global(0x24, c)
	b = append(b, 0x41, 0x00, 0x40, 0x00, 0x1a) // i32.const 0; memory.grow 0; drop
	global(0x23, f)
	b = append(b, 0x04, 0x40, 0x00, 0x0b) // if; unreachable; end
	return append(b, 0x0b)                // end
}

// scan walks the sections of wasm, validating their framing and order,
// counting globals and functions, checking export names and recording the
// loop positions of every function body.
func (m *moduleInfo) scan(wasm []byte) error {
	if len(wasm) < 8 {
		return errors.New("module header: " + errTruncated.Error())
	}
	if string(wasm[:4]) != "\x00asm" {
		return errors.New("module header: bad magic number")
	}
	if string(wasm[4:8]) != "\x01\x00\x00\x00" {
		return fmt.Errorf("module header: unsupported version % x", wasm[4:8])
	}
	m.sections = make([]section, 0, 16)
	lastRank := 0
	d := decoder{b: wasm, pos: 8}
	for d.pos < len(wasm) {
		s := section{start: d.pos}
		s.id = d.b[d.pos]
		d.pos++
		size, err := d.u32()
		if err != nil {
			return fmt.Errorf("section at offset %#x: size: %w", s.start, err)
		}
		s.contentPos = d.pos
		if uint64(size) > uint64(len(wasm)-d.pos) {
			return fmt.Errorf("section %d at offset %#x: size %d: %w", s.id, s.start, size, errTruncated)
		}
		s.end = d.pos + int(size)
		if s.id != secCustom {
			if int(s.id) >= len(sectionRank) || sectionRank[s.id] == 0 {
				return fmt.Errorf("section at offset %#x: unknown section id %d", s.start, s.id)
			}
			r := sectionRank[s.id]
			if r <= lastRank {
				return fmt.Errorf("section %d at offset %#x: duplicate or out of order", s.id, s.start)
			}
			lastRank = r
		}
		sd := decoder{b: wasm[:s.end], pos: s.contentPos}
		switch s.id {
		case secCustom:
			err = sd.customName(&s)
		case secImport:
			err = m.scanImports(&sd)
		case secFunction:
			m.funcCount, err = sd.u32()
		case secMemory:
			var n uint32
			n, err = sd.u32()
			m.memories += uint64(n)
		case secGlobal:
			// Each entry takes at least 4 bytes (type, mutability,
			// instruction, end); only the count is needed.
			m.definedGlobals, err = sd.u32()
			if err == nil && uint64(m.definedGlobals)*4 > uint64(s.end-sd.pos) {
				err = fmt.Errorf("%d globals do not fit in the section", m.definedGlobals)
			}
		case secExport:
			err = m.scanExports(&sd)
		case secCode:
			err = m.scanCode(&sd)
		}
		if err != nil {
			return fmt.Errorf("section %d at offset %#x: %w", s.id, s.start, err)
		}
		m.sections = append(m.sections, s)
		d.pos = s.end
	}
	if m.funcCount != m.codeCount {
		return fmt.Errorf("function section declares %d functions but code section has %d bodies", m.funcCount, m.codeCount)
	}
	return nil
}

// customName reads a custom section's name and marks DWARF sections to drop.
func (d *decoder) customName(s *section) error {
	name, err := d.name()
	if err != nil {
		return fmt.Errorf("custom section name: %w", err)
	}
	s.drop = strings.HasPrefix(string(name), debugPrefix)
	return nil
}

// scanImports counts imported globals, decoding every import descriptor.
func (m *moduleInfo) scanImports(d *decoder) error {
	count, err := d.u32()
	if err != nil {
		return err
	}
	for i := uint32(0); i < count; i++ {
		if err := m.importEntry(d); err != nil {
			return fmt.Errorf("import %d: %w", i, err)
		}
	}
	return d.atEnd()
}

func (m *moduleInfo) importEntry(d *decoder) error {
	if _, err := d.name(); err != nil {
		return err
	}
	if _, err := d.name(); err != nil {
		return err
	}
	kind, err := d.byte()
	if err != nil {
		return err
	}
	switch kind {
	case 0x00: // function: type index
		_, err = d.u32()
	case 0x01: // table: reference type, limits
		if err = d.valType(); err == nil {
			err = d.limits()
		}
	case 0x02: // memory: limits
		err = d.limits()
		m.memories++
	case 0x03: // global: value type, mutability
		if err = d.valType(); err == nil {
			_, err = d.byte()
		}
		m.importedGlobals++
	case 0x04: // tag: attribute, type index
		if _, err = d.byte(); err == nil {
			_, err = d.u32()
		}
	default:
		return fmt.Errorf("unknown import kind %#x", kind)
	}
	return err
}

// scanExports checks that exportName is not exported yet.
func (m *moduleInfo) scanExports(d *decoder) error {
	count, err := d.u32()
	if err != nil {
		return err
	}
	for i := uint32(0); i < count; i++ {
		name, err := d.name()
		if err != nil {
			return fmt.Errorf("export %d: %w", i, err)
		}
		if string(name) == m.exportName {
			return fmt.Errorf("export name %q is already used", name)
		}
		kind, err := d.byte()
		if err != nil {
			return fmt.Errorf("export %d: %w", i, err)
		}
		if kind > 0x04 {
			return fmt.Errorf("export %d: unknown export kind %#x", i, kind)
		}
		if _, err := d.u32(); err != nil {
			return fmt.Errorf("export %d: %w", i, err)
		}
	}
	return d.atEnd()
}

// scanCode decodes every function body and records its check points.
func (m *moduleInfo) scanCode(d *decoder) error {
	count, err := d.u32()
	if err != nil {
		return err
	}
	m.codeCount = count
	sectionEnd := len(d.b)
	for i := uint32(0); i < count; i++ {
		size, err := d.u32()
		if err != nil {
			return fmt.Errorf("function body %d: size: %w", i, err)
		}
		if uint64(size) > uint64(sectionEnd-d.pos) {
			return fmt.Errorf("function body %d: size %d: %w", i, size, errTruncated)
		}
		end := d.pos + int(size)
		bd := decoder{b: d.b[:end], pos: d.pos}
		m.loops, err = bd.body(m.loops)
		if err != nil {
			return fmt.Errorf("function body %d: %w", i, err)
		}
		d.pos = end
	}
	return d.atEnd()
}

// emit writes the instrumented module.
func (m *moduleInfo) emit(wasm []byte, globalIndex uint32, check []byte) []byte {
	// Upper bound of the output size: each body size may grow by one LEB
	// byte; the two sections may be new (id, 5-byte size, 5-byte count).
	size := len(wasm) + len(m.loops)*len(check) + int(m.codeCount) +
		2*(1+5+5) + len(newGlobalEntries) + 5 + len(m.exportName) + 1 + 5
	out := make([]byte, 0, size)
	out = append(out, wasm[:8]...)
	globalDone, exportDone := false, false
	for i := range m.sections {
		s := &m.sections[i]
		if s.drop {
			continue
		}
		if r := sectionRank[s.id]; s.id != secCustom {
			if !globalDone && r > sectionRank[secGlobal] {
				out = appendGlobalSection(out, nil, 0)
				globalDone = true
			}
			if !exportDone && r > sectionRank[secExport] {
				out = m.appendExportSection(out, nil, 0, globalIndex)
				exportDone = true
			}
		}
		switch s.id {
		case secGlobal:
			out = appendGlobalSection(out, wasm[s.contentPos:s.end], m.definedGlobals)
			globalDone = true
		case secExport:
			out = m.appendExportSection(out, wasm[s.contentPos:s.end], exportCount(wasm, s), globalIndex)
			exportDone = true
		case secCode:
			out = m.appendCodeSection(out, wasm, s, check)
		default:
			out = append(out, wasm[s.start:s.end]...)
		}
	}
	if !globalDone {
		out = appendGlobalSection(out, nil, 0)
	}
	if !exportDone {
		out = m.appendExportSection(out, nil, 0, globalIndex)
	}
	return out
}

// exportCount re-reads the (already validated) entry count of an export
// section.
func exportCount(wasm []byte, s *section) uint32 {
	d := decoder{b: wasm[:s.end], pos: s.contentPos}
	n, _ := d.u32()
	return n
}

// appendGlobalSection appends a global section holding the
// count+newGlobalCount globals: the entries of content (after its count)
// and the new globals.
func appendGlobalSection(out, content []byte, count uint32) []byte {
	entries := skipU32(content)
	n := uint64(lenU32(count+newGlobalCount)) + uint64(len(entries)) + uint64(len(newGlobalEntries))
	out = append(out, secGlobal)
	out = appendU32(out, uint32(n))
	out = appendU32(out, count+newGlobalCount)
	out = append(out, entries...)
	return append(out, newGlobalEntries[:]...)
}

// appendExportSection appends an export section holding the count entries of
// content (after its count) and the export of the new global.
func (m *moduleInfo) appendExportSection(out, content []byte, count uint32, globalIndex uint32) []byte {
	entries := skipU32(content)
	name := len(m.exportName)
	n := lenU32(count+1) + len(entries) + lenU32(uint32(name)) + name + 1 + lenU32(globalIndex)
	out = append(out, secExport)
	out = appendU32(out, uint32(n))
	out = appendU32(out, count+1)
	out = append(out, entries...)
	out = appendU32(out, uint32(name))
	out = append(out, m.exportName...)
	out = append(out, exportKindGlobal)
	return appendU32(out, globalIndex)
}

// appendCodeSection appends the code section s of wasm with check inserted
// at every recorded loop position, re-encoding body and section sizes.
func (m *moduleInfo) appendCodeSection(out, wasm []byte, s *section, check []byte) []byte {
	// First pass over the body headers: the new section size.
	d := decoder{b: wasm[:s.end], pos: s.contentPos}
	count, _ := d.u32()
	total := lenU32(count)
	loops := m.loops
	for i := uint32(0); i < count; i++ {
		size, _ := d.u32()
		end := d.pos + int(size)
		k := 0
		for k < len(loops) && loops[k] < end {
			k++
		}
		loops = loops[k:]
		newSize := int(size) + k*len(check)
		total += lenU32(uint32(newSize)) + newSize
		d.pos = end
	}
	out = append(out, secCode)
	out = appendU32(out, uint32(total))
	out = appendU32(out, count)
	// Second pass: copy the bodies with the checks.
	d.pos = s.contentPos
	_, _ = d.u32()
	loops = m.loops
	for i := uint32(0); i < count; i++ {
		size, _ := d.u32()
		end := d.pos + int(size)
		k := 0
		for k < len(loops) && loops[k] < end {
			k++
		}
		out = appendU32(out, uint32(int(size)+k*len(check)))
		pos := d.pos
		for _, at := range loops[:k] {
			out = append(out, wasm[pos:at]...)
			out = append(out, check...)
			pos = at
		}
		out = append(out, wasm[pos:end]...)
		loops = loops[k:]
		d.pos = end
	}
	return out
}

// skipU32 returns b without its leading LEB128 count (nil for nil).
func skipU32(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	d := decoder{b: b}
	_, _ = d.u32()
	return b[d.pos:]
}

// lenU32 is the length of v's minimal unsigned LEB128 encoding.
func lenU32(v uint32) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// appendU32 appends v's minimal unsigned LEB128 encoding.
func appendU32(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

package interrupt

import (
	"errors"
	"fmt"
)

// decoder reads the binary format from b, starting at pos. b ends where the
// unit being decoded (a section or a function body) ends, so reading past it
// is an error rather than a read into the next unit.
type decoder struct {
	b   []byte
	pos int
}

// Errors of the LEB128 readers.
var (
	errLEBTooLong  = errors.New("LEB128 number too long")
	errLEBOverflow = errors.New("LEB128 number out of range")
)

func (d *decoder) atEnd() error {
	if d.pos != len(d.b) {
		return fmt.Errorf("%d unexpected bytes at offset %#x", len(d.b)-d.pos, d.pos)
	}
	return nil
}

func (d *decoder) byte() (byte, error) {
	if d.pos >= len(d.b) {
		return 0, errTruncated
	}
	c := d.b[d.pos]
	d.pos++
	return c, nil
}

// skip skips n raw bytes.
func (d *decoder) skip(n int) error {
	if len(d.b)-d.pos < n {
		return errTruncated
	}
	d.pos += n
	return nil
}

// u32 reads an unsigned LEB128 number of at most 32 bits.
func (d *decoder) u32() (uint32, error) {
	var v uint32
	for i := 0; i < 5; i++ {
		if d.pos >= len(d.b) {
			return 0, errTruncated
		}
		c := d.b[d.pos]
		d.pos++
		if i == 4 && c > 0x0f {
			return 0, errLEBOverflow
		}
		v |= uint32(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v, nil
		}
	}
	return 0, errLEBTooLong
}

// skipLEB skips a LEB128 number (signed or unsigned) of at most maxBytes
// bytes.
func (d *decoder) skipLEB(maxBytes int) error {
	for i := 0; i < maxBytes; i++ {
		if d.pos >= len(d.b) {
			return errTruncated
		}
		c := d.b[d.pos]
		d.pos++
		if c < 0x80 {
			return nil
		}
	}
	return errLEBTooLong
}

// s33 reads a signed LEB128 number of at most 33 bits (a block type index
// or heap type).
func (d *decoder) s33() (int64, error) {
	var v int64
	for i := 0; i < 5; i++ {
		if d.pos >= len(d.b) {
			return 0, errTruncated
		}
		c := d.b[d.pos]
		d.pos++
		v |= int64(c&0x7f) << (7 * i)
		if c < 0x80 {
			if shift := 7 * (i + 1); c&0x40 != 0 {
				v |= -1 << shift
			}
			return v, nil
		}
	}
	return 0, errLEBTooLong
}

// name reads a length-prefixed name and returns its bytes (a sub-slice of
// the input).
func (d *decoder) name() ([]byte, error) {
	n, err := d.u32()
	if err != nil {
		return nil, err
	}
	if uint64(n) > uint64(len(d.b)-d.pos) {
		return nil, errTruncated
	}
	s := d.b[d.pos : d.pos+int(n)]
	d.pos += int(n)
	return s, nil
}

// limits reads table or memory limits (flags, min, optional max).
func (d *decoder) limits() error {
	flags, err := d.byte()
	if err != nil {
		return err
	}
	if flags > 0x07 {
		return fmt.Errorf("unknown limits flags %#x", flags)
	}
	if err := d.skipLEB(10); err != nil {
		return err
	}
	if flags&0x01 != 0 {
		return d.skipLEB(10)
	}
	return nil
}

// Value and heap type codes (single-byte encodings).
const (
	typeRefNull = 0x63 // (ref null ht)
	typeRef     = 0x64 // (ref ht)
	blockEmpty  = 0x40
)

// isValTypeByte reports whether c is a one-byte value type: a number type,
// v128, or an abstract reference type shorthand (exnref 0x69 … noexn 0x74).
func isValTypeByte(c byte) bool {
	return (c >= 0x7b && c <= 0x7f) || (c >= 0x69 && c <= 0x74)
}

// valType reads a value type.
func (d *decoder) valType() error {
	c, err := d.byte()
	if err != nil {
		return err
	}
	if c == typeRefNull || c == typeRef {
		_, err := d.s33()
		return err
	}
	if !isValTypeByte(c) {
		return fmt.Errorf("unknown value type %#x at offset %#x", c, d.pos-1)
	}
	return nil
}

// blockType reads a block type: empty (0x40), a value type, or a
// non-negative s33 type index.
func (d *decoder) blockType() error {
	if d.pos >= len(d.b) {
		return errTruncated
	}
	c := d.b[d.pos]
	if c == blockEmpty || c == typeRefNull || c == typeRef || isValTypeByte(c) {
		return d.valTypeOrEmpty()
	}
	v, err := d.s33()
	if err != nil {
		return err
	}
	if v < 0 {
		return fmt.Errorf("unknown block type %d at offset %#x", v, d.pos)
	}
	return nil
}

func (d *decoder) valTypeOrEmpty() error {
	if d.b[d.pos] == blockEmpty {
		d.pos++
		return nil
	}
	return d.valType()
}

// memarg reads a memory immediate: alignment (bit 6 announces a memory
// index), optional memory index, offset.
func (d *decoder) memarg() error {
	align, err := d.u32()
	if err != nil {
		return err
	}
	if align&0x40 != 0 {
		if _, err := d.u32(); err != nil {
			return err
		}
	}
	return d.skipLEB(10)
}

// u32s skips n unsigned LEB128 numbers of at most 32 bits.
func (d *decoder) u32s(n int) error {
	for i := 0; i < n; i++ {
		if _, err := d.u32(); err != nil {
			return err
		}
	}
	return nil
}

// body decodes a function body (locals and instructions) that must end
// exactly at the end of d.b, and appends to loops the check points: the
// offset of the first instruction, then the offset just after each loop's
// block type.
func (d *decoder) body(loops []int) ([]int, error) {
	groups, err := d.u32()
	if err != nil {
		return loops, fmt.Errorf("locals: %w", err)
	}
	for i := uint32(0); i < groups; i++ {
		if _, err := d.u32(); err != nil {
			return loops, fmt.Errorf("locals: %w", err)
		}
		if err := d.valType(); err != nil {
			return loops, fmt.Errorf("locals: %w", err)
		}
	}
	// The function's entry is a check point too: a recursion that enters
	// no loop (fib without a loop, say) must still be stoppable.
	loops = append(loops, d.pos)
	depth := 1
	for {
		start := d.pos
		if start >= len(d.b) {
			return loops, errors.New("missing end of function")
		}
		op := d.b[start]
		d.pos++
		if op >= 0x45 && op <= 0xc4 { // numeric instructions, sign extension
			continue
		}
		var err error
		switch op {
		case 0x00, 0x01, 0x05, 0x0a, 0x0f, 0x19, 0x1a, 0x1b, 0xd1, 0xd3, 0xd4:
			// unreachable, nop, else, throw_ref, return, catch_all,
			// drop, select, ref.is_null, ref.eq, ref.as_non_null
		case 0x02, 0x04, 0x06: // block, if, try
			err = d.blockType()
			depth++
		case 0x03: // loop
			err = d.blockType()
			depth++
			loops = append(loops, d.pos)
		case 0x0b: // end
			depth--
			if depth == 0 {
				if d.pos != len(d.b) {
					return loops, fmt.Errorf("%d bytes after end of function at offset %#x", len(d.b)-d.pos, d.pos)
				}
				return loops, nil
			}
		case 0x18: // delegate: label; ends a try
			_, err = d.u32()
			depth--
			if depth == 0 {
				return loops, fmt.Errorf("delegate outside try at offset %#x", start)
			}
		case 0x07, 0x08, 0x09, 0x0c, 0x0d, 0x10, 0x12, 0x14, 0x15,
			0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x3f, 0x40, 0xd2, 0xd5, 0xd6:
			// catch, throw, rethrow, br, br_if, call, return_call,
			// call_ref, return_call_ref, local/global/table get/set/tee,
			// memory.size, memory.grow, ref.func, br_on_null,
			// br_on_non_null: one u32
			_, err = d.u32()
		case 0x0e: // br_table: vec(label) label
			var n uint32
			if n, err = d.u32(); err == nil {
				if uint64(n) >= uint64(len(d.b)-d.pos) {
					err = errTruncated
				} else {
					err = d.u32s(int(n) + 1)
				}
			}
		case 0x11, 0x13: // call_indirect, return_call_indirect: type, table
			err = d.u32s(2)
		case 0x1c: // select t*
			var n uint32
			if n, err = d.u32(); err == nil {
				for i := uint32(0); i < n && err == nil; i++ {
					err = d.valType()
				}
			}
		case 0x1f: // try_table: block type, vec(catch)
			if err = d.blockType(); err == nil {
				err = d.catchClauses()
			}
			depth++
		case 0x28, 0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f, 0x30, 0x31, 0x32, 0x33, 0x34,
			0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x3b, 0x3c, 0x3d, 0x3e: // loads, stores
			err = d.memarg()
		case 0x41: // i32.const
			err = d.skipLEB(5)
		case 0x42: // i64.const
			err = d.skipLEB(10)
		case 0x43: // f32.const
			err = d.skip(4)
		case 0x44: // f64.const
			err = d.skip(8)
		case 0xd0: // ref.null heap type
			_, err = d.s33()
		case 0xfc:
			err = d.miscOp()
		case 0xfd:
			err = d.simdOp()
		case 0xfe:
			err = d.atomicOp()
		default:
			return loops, fmt.Errorf("unknown opcode 0x%02x at offset %#x", op, start)
		}
		if err != nil {
			return loops, fmt.Errorf("instruction 0x%02x at offset %#x: %w", op, start, err)
		}
	}
}

// catchClauses reads the catch clauses of try_table.
func (d *decoder) catchClauses() error {
	n, err := d.u32()
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		kind, err := d.byte()
		if err != nil {
			return err
		}
		switch kind {
		case 0x00, 0x01: // catch, catch_ref: tag, label
			err = d.u32s(2)
		case 0x02, 0x03: // catch_all, catch_all_ref: label
			_, err = d.u32()
		default:
			return fmt.Errorf("unknown catch clause kind %#x", kind)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// miscOp reads the rest of a 0xFC-prefixed instruction.
func (d *decoder) miscOp() error {
	sub, err := d.u32()
	if err != nil {
		return err
	}
	switch {
	case sub <= 0x07: // saturating truncation
		return nil
	case sub == 0x08, sub == 0x0a, sub == 0x0c, sub == 0x0e:
		// memory.init data mem, memory.copy mem mem, table.init elem
		// table, table.copy table table
		return d.u32s(2)
	case sub <= 0x11:
		// data.drop, memory.fill, elem.drop, table.grow, table.size,
		// table.fill: one index
		_, err = d.u32()
		return err
	}
	return fmt.Errorf("unknown opcode 0xfc %#x", sub)
}

// simdReserved marks the unassigned opcodes of the 0xFD prefix in
// 0x5e..0xff.
var simdReserved = [256]bool{
	0x9a: true, 0xa2: true, 0xa5: true, 0xa6: true, 0xaf: true, 0xb0: true,
	0xb2: true, 0xb3: true, 0xb4: true, 0xbb: true, 0xc2: true, 0xc5: true,
	0xc6: true, 0xcf: true, 0xd0: true, 0xd2: true, 0xd3: true, 0xd4: true,
	0xe2: true, 0xee: true,
}

// simdOp reads the rest of a 0xFD-prefixed (SIMD) instruction.
func (d *decoder) simdOp() error {
	sub, err := d.u32()
	if err != nil {
		return err
	}
	switch {
	case sub <= 0x0b: // v128.load*, v128.store
		return d.memarg()
	case sub == 0x0c, sub == 0x0d: // v128.const, i8x16.shuffle
		return d.skip(16)
	case sub <= 0x14: // swizzle, splats
		return nil
	case sub <= 0x22: // extract_lane, replace_lane
		return d.skip(1)
	case sub <= 0x53:
		return nil
	case sub <= 0x5b: // v128.load*_lane, v128.store*_lane
		if err := d.memarg(); err != nil {
			return err
		}
		return d.skip(1)
	case sub <= 0x5d: // v128.load32_zero, v128.load64_zero
		return d.memarg()
	case sub <= 0xff:
		if simdReserved[sub] {
			break
		}
		return nil
	case sub <= 0x113: // relaxed SIMD
		return nil
	}
	return fmt.Errorf("unknown opcode 0xfd %#x", sub)
}

// atomicOp reads the rest of a 0xFE-prefixed (threads) instruction.
func (d *decoder) atomicOp() error {
	sub, err := d.u32()
	if err != nil {
		return err
	}
	switch {
	case sub <= 0x02, sub >= 0x10 && sub <= 0x4e: // notify, wait, loads, stores, rmw
		return d.memarg()
	case sub == 0x03: // atomic.fence
		return d.skip(1)
	}
	return fmt.Errorf("unknown opcode 0xfe %#x", sub)
}

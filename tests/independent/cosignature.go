// An independent check of a C2SP tlog-cosignature/v1 over a checkpoint note, written from the
// specifications (c2sp.org/signed-note, c2sp.org/tlog-checkpoint, c2sp.org/tlog-cosignature)
// with Go's standard library only: it shares no code with the controller it checks.
//
//	go run cosignature.go NOTE_FILE LOG_VKEY WITNESS_VKEY
//
// It verifies the log's Ed25519 signature (alg 0x01) over the note's body, and the witness's
// cosignature (alg 0x04: an 8-byte big-endian timestamp, then an Ed25519 signature of
// "cosignature/v1\ntime <timestamp>\n" followed by the whole body, extension lines included).
// It prints the origin, the size, the timestamp and the number of extension lines, and exits 0;
// anything wrong prints why and exits 1.
package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
)

type vkey struct {
	name string
	id   []byte
	alg  byte
	key  ed25519.PublicKey
}

func parseVkey(text string) vkey {
	parts := strings.SplitN(strings.TrimSpace(text), "+", 3) // base64 has "+" of its own
	if len(parts) != 3 {
		fail("a verifier key is name+id+key: %q", text)
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) != 33 {
		fail("the key of %q is not base64 of an algorithm byte and 32 bytes", text)
	}
	k := vkey{name: parts[0], alg: raw[0], key: ed25519.PublicKey(raw[1:])}
	// c2sp.org/signed-note: key ID = SHA-256(name || 0x0A || alg || key)[:4]
	h := sha256.New()
	h.Write([]byte(k.name))
	h.Write([]byte{0x0A, k.alg})
	h.Write(k.key)
	k.id = h.Sum(nil)[:4]
	if parts[1] != fmt.Sprintf("%08x", k.id) {
		fail("the key ID %s of %q is not the one its name and key give", parts[1], k.name)
	}
	return k
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 4 {
		fail("usage: cosignature NOTE_FILE LOG_VKEY WITNESS_VKEY")
	}
	note, err := os.ReadFile(os.Args[1])
	if err != nil {
		fail("%v", err)
	}
	logKey, witnessKey := parseVkey(os.Args[2]), parseVkey(os.Args[3])
	if logKey.alg != 0x01 || witnessKey.alg != 0x04 {
		fail("the log's key is alg 0x01 (Ed25519), the witness's alg 0x04 (cosignature/v1)")
	}
	split := bytes.LastIndex(note, []byte("\n\n"))
	if split < 0 {
		fail("no blank line between the body and the signatures")
	}
	body, sigs := note[:split+1], note[split+2:]
	lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	if len(lines) < 3 {
		fail("a checkpoint body has an origin, a size and a root hash")
	}
	size, err := strconv.ParseUint(lines[1], 10, 64)
	if err != nil || (lines[1] != "0" && strings.HasPrefix(lines[1], "0")) {
		fail("the size %q is not a decimal number", lines[1])
	}
	if root, err := base64.StdEncoding.DecodeString(lines[2]); err != nil || len(root) != 32 {
		fail("the root hash %q is not base64 of 32 bytes", lines[2])
	}
	if lines[0] != logKey.name {
		fail("the origin %q is not the log's key name %q", lines[0], logKey.name)
	}
	var logOK, witnessOK bool
	var timestamp uint64
	for _, line := range strings.Split(strings.TrimSuffix(string(sigs), "\n"), "\n") {
		fields := strings.Split(line, " ")
		if len(fields) != 3 || fields[0] != "\u2014" {
			fail("a signature line is an em dash, a key name and base64: %q", line)
		}
		raw, err := base64.StdEncoding.DecodeString(fields[2])
		if err != nil || len(raw) < 4 {
			fail("a signature line's base64 is bad: %q", line)
		}
		switch {
		case fields[1] == logKey.name && bytes.Equal(raw[:4], logKey.id):
			if !ed25519.Verify(logKey.key, body, raw[4:]) {
				fail("the log's signature does not verify")
			}
			logOK = true
		case fields[1] == witnessKey.name && bytes.Equal(raw[:4], witnessKey.id):
			if len(raw) != 4+8+64 {
				fail("a cosignature/v1 is a key ID, a timestamp and a signature")
			}
			timestamp = binary.BigEndian.Uint64(raw[4:12])
			message := append([]byte(fmt.Sprintf("cosignature/v1\ntime %d\n", timestamp)), body...)
			if !ed25519.Verify(witnessKey.key, message, raw[12:]) {
				fail("the witness's cosignature does not verify over the whole body")
			}
			witnessOK = true
		}
	}
	if !logOK || !witnessOK {
		fail("the note lacks the log's signature or the witness's cosignature")
	}
	fmt.Printf("ok origin=%s size=%d timestamp=%d extensions=%d\n", lines[0], size, timestamp, len(lines)-3)
}

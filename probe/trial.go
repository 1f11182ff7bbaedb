package probe

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	mrand "math/rand/v2"

	"github.com/jackc/pgx/v5/pgconn"
)

// A server can refuse every new session after it has authenticated it: a
// session_preload_libraries (or local_preload_libraries) naming a file
// that is not there, reloaded (FATAL 58P01 "could not access file"), a
// backend that cannot attach to shared memory or load its caches. Every
// client pgdns sends there is refused, while pgdns's own session, open
// from before, works; and none of pgdns's other checks gets that far: the
// postmaster's status says "ready", the bare connect ends at the
// SSLRequest's answer, and the startup packet at the request for a
// password (review 8, R8-6). So now and then (trialIntervals admission
// intervals: a minute by default) the next startup packet due (every
// third reach, 12 s by default, or the admission attempt) is a trial
// instead: a whole session start with the probe's own connection config
// (its TLS, startup packet, role and password), to ReadyForQuery, then
// Terminate, which the server logs as a session that ended. It takes the
// place of an attempt that costs the server a fork already (under trust, a
// whole session), so it adds no backend start.
//
// A FATAL there that is not about pgdns's own role, database or startup
// parameters (trialProvesNothing) is a refusal of every client: the host
// leaves the answers, as an hba refusal takes it out (admission.go), with
// the server's message as the reason, and pgdns closes its session; the
// next probe's own connect is then a session start too, so the host is
// back as soon as one is admitted. So is a TLS handshake that fails to
// verify the server's certificate under a probe.dsn that verifies it, and
// a server that declines TLS under one that requires it (tlsRefusal,
// review 9, R9-1). A timeout or a network error of the trial is no
// evidence: the probe and the bare connect judge those.
//
// Cost: the server starts a backend (a fork and its caches, about 5 ms of
// its CPU on PostgreSQL 15), and pgdns authenticates. SCRAM-SHA-256 costs
// a client a PBKDF2 of the password (4,096 iterations by default) per
// session start; the trial keeps the keys it derived with the server's
// salt and iteration count (scramKeys) and derives them again only when
// those change, so a trial costs pgdns a few hundred microseconds
// (docs/probe.md). Authentication other than trust and SCRAM-SHA-256
// (cleartext or md5 passwords, GSS, channel binding required, require_auth,
// a password that SASLprep could change) goes through pgconn's connect,
// which knows them all and pays the PBKDF2 each time; those trials come
// half as often.
const trialIntervals = 60

// trialPeriod is how often a checker makes a trial.
func (c *pgChecker) trialPeriod() time.Duration { return trialIntervals * c.admitEvery }

// trialDue reports whether the attempt to start now should be a trial. A
// session opened since the last trial was itself a session start that
// worked: the next trial is due half a period to a period after it, at a
// random point, so that the trials of a fleet started together do not
// stay together.
func (c *pgChecker) trialDue(now time.Time) bool {
	if c.trialNext.IsZero() || c.trialNext.Before(c.connectedAt) {
		p := c.trialPeriod()
		c.trialNext = c.connectedAt.Add(p/2 + mrand.N(p/2+1))
	}
	return !now.Before(c.trialNext)
}

// startTrial starts a trial beside the probe (startAdmission), bounded by
// the probe's deadline. Its silence is not judged as a bare connect's.
func (c *pgChecker) startTrial(deadline time.Time) {
	p := c.trialPeriod()
	if c.scram != nil && c.scram.viaPgconn {
		p *= 2 // a PBKDF2 each time (SCRAM through pgconn): half as often
	}
	c.trialNext = time.Now().Add(p)
	keys := &c.scram // written by the trial's goroutine, read by the next trial's, after the first's result was taken
	c.startAdmission(deadline, func(ctx context.Context, cfg *connConfig) error { return tryTrial(ctx, cfg, keys) })
	c.reachTry = false
}

// tryTrial starts a whole session to the server of cfg and terminates it
// once the server is ready for a query: nil when it was, a definitive
// error (notServing) when a FATAL of the session's start refuses every
// client (or its TLS does: tlsRefusal), and an error that proves nothing otherwise (a refusal of
// pgdns's role alone, a timeout, a network error). A refusal by
// pg_hba.conf is tried the other way under sslmode=prefer or allow, as
// tryAdmission does.
func tryTrial(ctx context.Context, cfg *connConfig, keys **scramKeys) error {
	c := &cfg.Config
	ctx, cancel := withConnectTimeout(ctx, c)
	defer cancel()
	err := trialOnce(ctx, cfg, c.TLSConfig, keys)
	if hbaRefusal(err) {
		for _, f := range c.Fallbacks {
			if f.Host != c.Host || f.Port != c.Port || (f.TLSConfig == nil) == (c.TLSConfig == nil) {
				continue
			}
			err = trialOnce(ctx, cfg, f.TLSConfig, keys)
			break
		}
		if hbaRefusal(err) {
			return notServing{err}
		}
	}
	pg := errors.Is(err, errOtherAuth)
	if pg {
		err = tlsRefusal(cfg, trialByPgconn(ctx, c)) // its TLS judged as trialOnce's (startTLS)
	}
	if pg || *keys != nil {
		if *keys == nil {
			*keys = &scramKeys{}
		}
		(*keys).viaPgconn = pg
	}
	return trialJudged(err)
}

// errOtherAuth: the server asked for an authentication the trial does not
// make itself; pgconn's connect makes it.
var errOtherAuth = errors.New("an authentication for pgconn")

// trialByPgconn is a trial through pgconn's connect: every authentication
// method and policy of the probe's config, a PBKDF2 each time.
func trialByPgconn(ctx context.Context, c *pgconn.Config) error {
	pc, err := pgconn.ConnectConfig(ctx, c)
	if err != nil {
		return err
	}
	return pc.Close(ctx)
}

// trialJudged is what a trial that ended with err proves: nil when it
// was admitted or proves nothing, a definitive error when its server
// refuses every client. A FATAL of the server's is such a refusal unless
// it is about pgdns's own role, database or startup parameters
// (trialProvesNothing); one pgdns cannot place (a library, a file, memory,
// an internal error) is taken for a refusal of every client, failing
// closed, and the reason says it might be pgdns's alone. Without an error
// of the server's (a timeout, a reset) the trial proves nothing; a
// postmaster's fork failure or a shutdown's refusal stays definitive, as
// for any attempt.
func trialJudged(err error) error {
	if err == nil || errors.Is(err, ErrNotServing) {
		return err
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return trialInconclusive{err}
	}
	if definitive(err) {
		return notServing{err} // 57P01-57P03: as every attempt takes them
	}
	if trialProvesNothing(pgErr) {
		return err
	}
	return notServing{trialRefusal{msg: "every new session fails at its start, after authentication (a client's too, unless a setting of pgdns's own role or database alone does it): " + pgErr.Error(), err: err}}
}

// trialProvesNothing: a FATAL of a session's start that is about pgdns's
// own role, database or startup parameters, which clients (roles and
// databases of their own) need not get: a wrong password (28P01), a role
// missing, NOLOGIN, or a certificate the role needs (28000 other than
// pg_hba.conf's refusal, which tryTrial took already), a database missing
// (3D000) or not accepting connections (55000, datallowconn), no CONNECT
// privilege (42501), a connection limit of the role or the database, or
// every slot taken (53300: rule 3, a full server stays), a startup
// parameter the server rejects (22023, 42704, 55P02), and a protocol
// error (08P01: pgdns's side, or a pooler's).
func trialProvesNothing(e *pgconn.PgError) bool {
	switch e.Code {
	case "28P01", "28000", "3D000", "55000", "42501", "53300", "22023", "42704", "55P02", "08P01":
		return true
	}
	return false
}

// trialRefusal is a trial's FATAL that refuses every client: its message
// says so, errors.As still finds the server's *pgconn.PgError.
type trialRefusal struct {
	msg string
	err error
}

func (e trialRefusal) Error() string { return e.msg }
func (e trialRefusal) Unwrap() error { return e.err }

// trialInconclusive is a trial's failure without the server's word (a
// timeout, a reset, a refused connect): no evidence, whatever its cause
// (definitive and noAnswer see through it no further than its message).
type trialInconclusive struct{ err error }

func (e trialInconclusive) Error() string { return "a session start (trial): " + e.err.Error() }

// trialOnce is one trial, asking for TLS with tc when it is not nil.
func trialOnce(ctx context.Context, cfg *connConfig, tc *tls.Config, keys **scramKeys) error {
	c := &cfg.Config
	if c.RequireAuth != "" || c.ChannelBinding == "require" || c.SSLCertMode == "require" || c.OAuthTokenProvider != nil {
		return errOtherAuth // policies only pgconn's connect keeps
	}
	raw, err := dialServer(ctx, c)
	if err != nil {
		return err
	}
	defer raw.Close()
	// Its end ends its wait, by ctx's timer alone (admitOnce).
	stop := context.AfterFunc(ctx, func() { _ = raw.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	a := &admitter{conn: raw}
	if tc != nil {
		if err := a.startTLS(ctx, cfg, tc); err != nil {
			return err
		}
	}
	if _, err := a.conn.Write(startupPacket(cfg)); err != nil {
		return err
	}
	a.buf = make([]byte, 256)
	var sc *scramExchange
	for {
		typ, body, err := a.next()
		if err != nil {
			return err
		}
		switch typ {
		case 'E':
			return pgErrorOf(body)
		case 'R':
			if len(body) < 4 {
				return errors.New("a short authentication message")
			}
			switch code := binary.BigEndian.Uint32(body); {
			case code == 0: // AuthenticationOk
			case code == 10 && sc == nil: // AuthenticationSASL
				if !scramOffered(body[4:]) || !plainPassword(c.Password) {
					return errOtherAuth
				}
				sc = &scramExchange{password: c.Password, keys: keys}
				if err := a.send('p', sc.first()); err != nil {
					return err
				}
			case code == 11 && sc != nil: // AuthenticationSASLContinue
				final, err := sc.final(body[4:])
				if err != nil {
					return err
				}
				if err := a.send('p', final); err != nil {
					return err
				}
			case code == 12 && sc != nil: // AuthenticationSASLFinal
				if err := sc.verify(body[4:]); err != nil {
					return err
				}
			default: // cleartext, md5, GSS, SSPI
				return errOtherAuth
			}
		case 'Z':
			_, err := a.conn.Write([]byte{'X', 0, 0, 0, 4}) // Terminate: the server logs a session that ended, no complaint
			return err
		case 'S', 'K', 'N', 'v':
			// ParameterStatus, BackendKeyData, NoticeResponse,
			// NegotiateProtocolVersion: read on.
		default:
			return fmt.Errorf("unexpected message %q in a new session", typ)
		}
	}
}

// send writes one message of type typ with body.
func (a *admitter) send(typ byte, body []byte) error {
	m := make([]byte, 5, 5+len(body))
	m[0] = typ
	binary.BigEndian.PutUint32(m[1:], uint32(4+len(body)))
	_, err := a.conn.Write(append(m, body...))
	return err
}

// scramOffered: the SASL mechanisms listed (NUL-terminated names) include
// SCRAM-SHA-256.
func scramOffered(list []byte) bool {
	return slices.Contains(strings.Split(string(list), "\x00"), "SCRAM-SHA-256")
}

// plainPassword: p is printable ASCII, which SASLprep leaves as it is;
// any other goes through pgconn, which normalizes it as PostgreSQL does.
func plainPassword(p string) bool {
	for i := 0; i < len(p); i++ {
		if p[i] < 0x20 || p[i] > 0x7e {
			return false
		}
	}
	return true
}

// scramKeys are the SCRAM-SHA-256 keys of a password derived with a
// server's salt and iteration count: the PBKDF2 a client pays per session
// start, kept per checker for its next trial (the server's verifier, and
// so its salt, changes only with the role's password).
type scramKeys struct {
	password, salt       string
	iterations           int
	clientKey, serverKey []byte
	// viaPgconn: the last trial went through pgconn's connect (an
	// authentication the trial does not make itself), whose SCRAM pays
	// the PBKDF2 each time: the next trial comes after two periods.
	viaPgconn bool
}

// scramExchange is one SCRAM-SHA-256 exchange without channel binding
// (RFC 5802; the GS2 header "n,,", which PostgreSQL accepts with or
// without TLS).
type scramExchange struct {
	password   string
	keys       **scramKeys
	clientBare string // client-first-message-bare
	authMsg    string
	k          *scramKeys
}

// first is the SASLInitialResponse's body: the mechanism, then the
// client-first-message.
func (s *scramExchange) first() []byte {
	var n [18]byte
	_, _ = rand.Read(n[:])
	s.clientBare = "n=,r=" + base64.RawStdEncoding.EncodeToString(n[:])
	msg := "n,," + s.clientBare
	b := append([]byte("SCRAM-SHA-256"), 0, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(b[len(b)-4:], uint32(len(msg)))
	return append(b, msg...)
}

// final reads the server-first-message and returns the
// client-final-message.
func (s *scramExchange) final(serverFirst []byte) ([]byte, error) {
	sf := string(serverFirst)
	var nonce, salt, iter string
	for _, f := range strings.Split(sf, ",") {
		switch {
		case strings.HasPrefix(f, "r="):
			nonce = f[2:]
		case strings.HasPrefix(f, "s="):
			salt = f[2:]
		case strings.HasPrefix(f, "i="):
			iter = f[2:]
		}
	}
	i, err := strconv.Atoi(iter)
	if err != nil || i <= 0 || i > 10_000_000 || salt == "" || !strings.HasPrefix(nonce, s.clientBare[5:]) || len(nonce) <= len(s.clientBare[5:]) {
		return nil, fmt.Errorf("an invalid SCRAM server-first-message %q", sf)
	}
	k := *s.keys
	if k == nil || k.password != s.password || k.salt != salt || k.iterations != i {
		raw, err := base64.StdEncoding.DecodeString(salt)
		if err != nil {
			return nil, fmt.Errorf("an invalid SCRAM salt: %w", err)
		}
		salted, err := pbkdf2.Key(sha256.New, s.password, raw, i, 32)
		if err != nil {
			return nil, err
		}
		k = &scramKeys{password: s.password, salt: salt, iterations: i,
			clientKey: hmacSHA256(salted, "Client Key"), serverKey: hmacSHA256(salted, "Server Key")}
		*s.keys = k
	}
	s.k = k
	without := "c=biws,r=" + nonce
	s.authMsg = s.clientBare + "," + sf + "," + without
	stored := sha256.Sum256(k.clientKey)
	proof := hmacSHA256(stored[:], s.authMsg)
	for j := range proof {
		proof[j] ^= k.clientKey[j]
	}
	return []byte(without + ",p=" + base64.StdEncoding.EncodeToString(proof)), nil
}

// verify checks the server-final-message's signature: the server knew
// the password's verifier.
func (s *scramExchange) verify(serverFinal []byte) error {
	v, ok := strings.CutPrefix(string(serverFinal), "v=")
	want := base64.StdEncoding.EncodeToString(hmacSHA256(s.k.serverKey, s.authMsg))
	if !ok || !hmac.Equal([]byte(v), []byte(want)) {
		return errors.New("an invalid SCRAM server signature")
	}
	return nil
}

func hmacSHA256(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

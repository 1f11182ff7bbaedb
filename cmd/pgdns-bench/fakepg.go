package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgdns/pgdns/probe"
)

// runFakePG serves cheap fake PostgreSQL servers, one per address of the
// file given by -addrs from -first on (-n of them, all when 0): enough of
// the wire protocol to answer the probe's statement, prepared or sent as
// a query, exactly as the real servers of -primary-dsn and -dsn answer it
// (their row descriptions and rows, learned at start). They let the scale
// run configure thousands of hosts on a machine that runs three real
// servers.
//
// The fakes of the file form clusters of 3 (fakeClusters, fleetAnswers):
// a primary answering as the real primary does and two replicas
// answering as the real replica does, each cluster with a system
// identifier of its own, each fake its own server run (its own
// postmaster start time, its own application name), so that pgdns takes
// them for a fleet of small clusters and not for one server listed many
// times. Every process reads the whole file, so that a cluster may
// straddle two processes.
func runFakePG(args []string) {
	fs := flag.NewFlagSet("fakepg", flag.ExitOnError)
	addrsFile := fs.String("addrs", "", "file of every fake's address (host:port), one a line, in fakeClusters order")
	dsn := fs.String("dsn", "", "a real replica whose answer to the probe the fake replicas give")
	primaryDSN := fs.String("primary-dsn", "", "the real primary whose answer to the probe the fake primaries give")
	control := fs.String("control", "", "where to say, to each connection, how many probe statements the fakes have run: a line, then close")
	first := fs.Int("first", 0, "the first fake of -addrs this process serves")
	n := fs.Int("n", 0, "how many fakes of -addrs this process serves (0: all from -first)")
	_ = fs.Parse(args)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	rep, err := learnAnswer(ctx, *dsn)
	var prim *fakeAnswer
	if err == nil {
		prim, err = learnPrimaryAnswer(ctx, *primaryDSN)
	}
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakepg:", err)
		os.Exit(1)
	}
	addrs, err := readLines(*addrsFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakepg:", err)
		os.Exit(1)
	}
	answers, err := fleetAnswers(prim, rep, addrs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakepg:", err)
		os.Exit(1)
	}
	last := len(addrs)
	if *n > 0 {
		last = min(last, *first+*n)
	}
	for i := *first; i < last; i++ {
		fake := answers[i]
		ln, err := net.Listen("tcp", addrs[i])
		if err != nil {
			fmt.Fprintln(os.Stderr, "fakepg:", err)
			os.Exit(1)
		}
		go serveFakes(ln, fake)
	}
	if *control != "" {
		ln, err := net.Listen("tcp", *control)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fakepg:", err)
			os.Exit(1)
		}
		go serveCount(ln)
	}
	fmt.Println("ready")
	c := make(chan os.Signal, 1)
	signal.Notify(c, os.Interrupt)
	<-c
}

// serveFakes serves fake to every connection to ln, each on a goroutine
// of its own, until ln is closed.
func serveFakes(ln net.Listener, fake *fakeAnswer) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go serveFake(c, fake)
	}
}

// probesRun counts the probe statements the fakes ran (not the
// settings sources' statement), for -control.
var probesRun atomic.Int64

// serveCount tells each connection to ln probesRun, a line, and closes
// it.
func serveCount(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		fmt.Fprintf(c, "%d\n", probesRun.Load())
		c.Close()
	}
}

// fakeProbes asks the fakes' process at control how many probe
// statements it has run.
func fakeProbes(control string) (int64, error) {
	c, err := net.DialTimeout("tcp", control, 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return 0, fmt.Errorf("fakes' control %s: %w", control, err)
	}
	return strconv.ParseInt(strings.TrimSpace(line), 10, 64)
}

func readLines(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, l)
		}
	}
	return out, nil
}

// fakeAnswer is a real server's answer to the probe's statement: the
// parameter and row descriptions of the prepared statement and one row,
// in text format.
type fakeAnswer struct {
	params []uint32
	fields []pgproto3.FieldDescription
	row    [][]byte
	// The same of the probe's status statement (probe.ProbeStatusSQL),
	// which differs in its last column: the server's status.
	statusFields []pgproto3.FieldDescription
	status       []byte
	// senders: a fake primary's WAL senders, whose standbys column
	// depends on the parameters the probe binds (standbysJSON).
	senders []fakeSender
	// The same of the closing probe's statement (probe.ClosingSQL): its
	// row on a primary (the insert position, the backend's pid, which a
	// fake answers with its own: fakeBackendPID), or the error a server
	// in recovery answers it with.
	closingFields []pgproto3.FieldDescription
	closingRow    [][]byte
	closingErr    *pgproto3.ErrorResponse
}

// fakeBackendPID is every fake's backend pid: the BackendKeyData it sends,
// and what pg_backend_pid() reads in the closing statement.
const fakeBackendPID = 1

func ptr(i int) *int { return &i }

// statusRow is a's row as the status statement answers it.
func (a *fakeAnswer) statusRow() [][]byte {
	row := append([][]byte{}, a.row...)
	row[len(row)-1] = a.status
	return row
}

// The columns a fake makes its own (probe/check.go's probeSQL): the
// postmaster's start time, in µs since the epoch, and the WAL receiver's
// conninfo, which names the replica to its primary.
const (
	fakeStartedColumn  = 7
	fakeConninfoColumn = 9
)

// learnAnswer prepares and runs the probe's statement on the replica of
// dsn and keeps what it answered.
func learnAnswer(ctx context.Context, dsn string) (*fakeAnswer, error) {
	ans, err := learnRow(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if len(ans.row) <= fakeSenderColumn || string(ans.row[0]) != "t" {
		return nil, fmt.Errorf("not a replica's row: %q", ans.row)
	}
	if _, err := strconv.ParseInt(string(ans.row[fakeStartedColumn]), 10, 64); err != nil {
		return nil, fmt.Errorf("column %d is not the start time: %q", fakeStartedColumn+1, ans.row[fakeStartedColumn])
	}
	if !strings.Contains(string(ans.row[fakeConninfoColumn]), "application_name=") {
		return nil, fmt.Errorf("column %d is not a conninfo: %q", fakeConninfoColumn+1, ans.row[fakeConninfoColumn])
	}
	return ans, nil
}

// learnRow prepares and runs the probe's statement on the server of dsn
// and keeps what it answered.
func learnRow(ctx context.Context, dsn string) (*fakeAnswer, error) {
	pc, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer pc.Close(context.Background())
	ans := &fakeAnswer{}
	for _, st := range []struct{ name, sql string }{{probe.ProbeStatement, probe.ProbeSQL}, {probe.ProbeStatusStatement, probe.ProbeStatusSQL}} {
		sd, err := pc.Prepare(ctx, st.name, st.sql, nil)
		if err != nil {
			return nil, err
		}
		res := pc.ExecStatement(ctx, sd, probe.NoSendersKnown(), nil, nil).Read()
		if res.Err != nil {
			return nil, fmt.Errorf("%s: %w", st.name, res.Err)
		}
		if len(res.Rows) != 1 {
			return nil, fmt.Errorf("%s: %d rows", st.name, len(res.Rows))
		}
		var fields []pgproto3.FieldDescription
		for _, f := range sd.Fields {
			fields = append(fields, pgproto3.FieldDescription{Name: []byte(f.Name), TableOID: f.TableOID,
				TableAttributeNumber: f.TableAttributeNumber, DataTypeOID: f.DataTypeOID, DataTypeSize: f.DataTypeSize,
				TypeModifier: f.TypeModifier, Format: f.Format})
		}
		if st.name == probe.ProbeStatement {
			ans.params, ans.fields, ans.row = sd.ParamOIDs, fields, res.Rows[0]
		} else {
			ans.statusFields, ans.status = fields, res.Rows[0][len(res.Rows[0])-1]
		}
	}
	if err := learnClosing(ctx, pc, ans); err != nil {
		return nil, err
	}
	return ans, nil
}

// learnClosing prepares and runs the closing probe's statement on pc and
// keeps what it answered in ans: its row on a primary, its error on a
// replica.
func learnClosing(ctx context.Context, pc *pgconn.PgConn, ans *fakeAnswer) error {
	sd, err := pc.Prepare(ctx, probe.ClosingStatement, probe.ClosingSQL, nil)
	if err != nil {
		return err
	}
	ans.closingFields = fieldsOf(sd)
	res := pc.ExecStatement(ctx, sd, nil, nil, nil).Read()
	var pe *pgconn.PgError
	switch {
	case errors.As(res.Err, &pe):
		ans.closingErr = &pgproto3.ErrorResponse{Severity: pe.Severity, SeverityUnlocalized: pe.SeverityUnlocalized, Code: pe.Code,
			Message: pe.Message, Detail: pe.Detail, Hint: pe.Hint, File: pe.File, Line: pe.Line, Routine: pe.Routine}
	case res.Err != nil:
		return fmt.Errorf("%s: %w", probe.ClosingStatement, res.Err)
	case len(res.Rows) != 1 || len(res.Rows[0]) != 2:
		return fmt.Errorf("%s: %d rows", probe.ClosingStatement, len(res.Rows))
	default:
		ans.closingRow = res.Rows[0]
	}
	return nil
}

// fieldsOf is sd's row description as the server sent it.
func fieldsOf(sd *pgconn.StatementDescription) []pgproto3.FieldDescription {
	var fields []pgproto3.FieldDescription
	for _, f := range sd.Fields {
		fields = append(fields, pgproto3.FieldDescription{Name: []byte(f.Name), TableOID: f.TableOID,
			TableAttributeNumber: f.TableAttributeNumber, DataTypeOID: f.DataTypeOID, DataTypeSize: f.DataTypeSize,
			TypeModifier: f.TypeModifier, Format: f.Format})
	}
	return fields
}

// sourcesFields describe probe.SourcesSQL's columns: two booleans and a
// text.
var sourcesFields = []pgproto3.FieldDescription{
	{Name: []byte("?column?"), DataTypeOID: 16, DataTypeSize: 1, TypeModifier: -1},
	{Name: []byte("?column?"), DataTypeOID: 16, DataTypeSize: 1, TypeModifier: -1},
	{Name: []byte("c"), DataTypeOID: 25, DataTypeSize: -1, TypeModifier: -1},
}

// as is the answer of fake i: the learned row with a start time and an
// application name of its own.
func (a *fakeAnswer) as(i int) *fakeAnswer {
	row := make([][]byte, len(a.row))
	copy(row, a.row)
	started, _ := strconv.ParseInt(string(row[fakeStartedColumn]), 10, 64)
	row[fakeStartedColumn] = []byte(strconv.FormatInt(started-1-int64(i), 10))
	row[fakeConninfoColumn] = []byte("application_name=fake" + strconv.Itoa(i)) // primary_conninfo as written: no fallback_application_name
	return &fakeAnswer{params: a.params, fields: a.fields, row: row, statusFields: a.statusFields, status: a.status, senders: a.senders,
		closingFields: a.closingFields, closingRow: a.closingRow, closingErr: a.closingErr}
}

// serveFake speaks to one client as PostgreSQL 15 does: startup with
// trust authentication, then the probe's statements through the extended
// protocol (Parse, Describe, Bind, Execute, Close,
// Sync); replies are flushed at Sync, and after an error every message up
// to Sync is skipped, as the server does. Any other statement is an error.
func serveFake(c net.Conn, ans *fakeAnswer) {
	defer c.Close()
	be := pgproto3.NewBackend(c, c)
	for {
		msg, err := be.ReceiveStartupMessage()
		if err != nil {
			return
		}
		if _, ok := msg.(*pgproto3.StartupMessage); ok {
			break
		}
		if _, err := c.Write([]byte("N")); err != nil { // no SSL, no GSS
			return
		}
	}
	be.Send(&pgproto3.AuthenticationOk{})
	for _, p := range [][2]string{{"server_version", "15.0"}, {"client_encoding", "UTF8"},
		{"standard_conforming_strings", "on"}, {"DateStyle", "ISO, MDY"}, {"integer_datetimes", "on"}} {
		be.Send(&pgproto3.ParameterStatus{Name: p[0], Value: p[1]})
	}
	be.Send(&pgproto3.BackendKeyData{ProcessID: fakeBackendPID, SecretKey: []byte{0, 0, 0, 1}})
	be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	if be.Flush() != nil {
		return
	}
	// The statements prepared, by name, and what each is: the probe's
	// statement, its status variant, or probe.SourcesSQL (no rows).
	const (
		probeKind = iota
		statusKind
		replicaKind       // probe.ProbeReplicaSQL
		replicaStatusKind // probe.ProbeReplicaStatusSQL
		knownKind         // probe.ProbeKnownSQL
		knownStatusKind   // probe.ProbeKnownStatusSQL
		sourcesKind
		setKind     // probe.IsolationSetSQL, a session's first statement
		sessionKind // probe.SessionSQL (no rows)
		closingKind // probe.ClosingSQL
	)
	probeKinds := map[string]*int{probe.ProbeSQL: ptr(probeKind), probe.ProbeStatusSQL: ptr(statusKind),
		probe.ProbeReplicaSQL: ptr(replicaKind), probe.ProbeReplicaStatusSQL: ptr(replicaStatusKind),
		probe.ProbeKnownSQL: ptr(knownKind), probe.ProbeKnownStatusSQL: ptr(knownStatusKind), probe.ClosingSQL: ptr(closingKind)}
	prepared := map[string]bool{}
	kinds := map[string]int{}
	portal := false // the unnamed portal is bound
	portalKind := 0 // ... to a statement of this kind
	statusRow := ans.statusRow()
	// The replica variants answer as the others on a replica; on a
	// primary (not in recovery) their standbys column is NULL.
	replicaRow, replicaStatusRow := ans.row, statusRow
	if string(ans.row[0]) == "f" {
		replicaRow, replicaStatusRow = append([][]byte{}, ans.row...), append([][]byte{}, statusRow...)
		replicaRow[fakeStandbysColumn], replicaStatusRow[fakeStandbysColumn] = nil, nil
	}
	// The primary's statements take two parameters (standbysSQL); their
	// rows as last bound (bound: the parameters).
	params := map[int][]uint32{probeKind: ans.params, statusKind: ans.params, knownKind: ans.params, knownStatusKind: ans.params}
	primaryRow, primaryStatusRow := ans.row, statusRow
	knownRow, knownStatusRow := ans.row, statusRow // the known variants' (knownStandbysSQL)
	// The row each probe statement's Execute sends, by kind, as it is
	// now (a Bind may change the primary's and the known variants');
	// none for probe.SourcesSQL and probe.SessionSQL, which have no rows
	// here, nor for probe.IsolationSetSQL.
	// The closing statement's row: the fake's insert position (its
	// probe row's, as one server at rest reads both) and its own pid.
	var closingRow [][]byte
	if ans.closingRow != nil {
		closingRow = [][]byte{ans.row[fakeInsertColumn], []byte(strconv.Itoa(fakeBackendPID))}
	}
	rows := [...]*[][]byte{probeKind: &primaryRow, statusKind: &primaryStatusRow,
		replicaKind: &replicaRow, replicaStatusKind: &replicaStatusRow,
		knownKind: &knownRow, knownStatusKind: &knownStatusRow, sourcesKind: nil, setKind: nil, sessionKind: nil, closingKind: &closingRow}
	var bound [2]string
	failed := false // an error in the extended protocol: skip to Sync
	fail := func(code, text string) {
		be.Send(&pgproto3.ErrorResponse{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: code, Message: text})
		failed = true
	}
	complete := &pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")}
	for {
		msg, err := be.Receive()
		if err != nil {
			return
		}
		if _, sync := msg.(*pgproto3.Sync); failed && !sync {
			continue
		}
		switch m := msg.(type) {
		case *pgproto3.Query:
			// The probe's statements take parameters (or are not ones a
			// fake knows): as a simple query, PostgreSQL refuses them.
			if m.String == probe.ProbeSQL || m.String == probe.ProbeStatusSQL || m.String == probe.ProbeKnownSQL || m.String == probe.ProbeKnownStatusSQL {
				be.Send(&pgproto3.ErrorResponse{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "42P02", Message: "there is no parameter $1"})
			} else {
				be.Send(&pgproto3.ErrorResponse{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "42601", Message: "fakepg answers the probe's statement only"})
			}
			be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
			if be.Flush() != nil {
				return
			}
		case *pgproto3.Parse:
			switch {
			case m.Query == probe.SourcesSQL && (m.Name == "" || !prepared[m.Name]):
				// A fake has no role or database settings: no rows.
				prepared[m.Name], kinds[m.Name] = true, sourcesKind
				be.Send(&pgproto3.ParseComplete{})
			case m.Query == probe.SessionSQL && m.Name == "":
				prepared[m.Name], kinds[m.Name] = true, sessionKind
				be.Send(&pgproto3.ParseComplete{})
			case m.Query == probe.IsolationSetSQL && m.Name == "":
				prepared[m.Name], kinds[m.Name] = true, setKind
				be.Send(&pgproto3.ParseComplete{})
			case probeKinds[m.Query] == nil:
				fail("42601", "fakepg answers the probe's statements only")
			case m.Name != "" && prepared[m.Name]:
				fail("42P05", fmt.Sprintf("prepared statement %q already exists", m.Name))
			default:
				prepared[m.Name], kinds[m.Name] = true, *probeKinds[m.Query]
				be.Send(&pgproto3.ParseComplete{})
			}
		case *pgproto3.Describe:
			switch {
			case m.ObjectType == 'S' && prepared[m.Name]:
				be.Send(&pgproto3.ParameterDescription{ParameterOIDs: params[kinds[m.Name]]})
				fields := ans.fields
				switch kinds[m.Name] {
				case statusKind, replicaStatusKind, knownStatusKind:
					fields = ans.statusFields
				case sourcesKind:
					fields = sourcesFields
				case closingKind:
					fields = ans.closingFields
				}
				be.Send(&pgproto3.RowDescription{Fields: fields})
			case m.ObjectType == 'P' && portal && m.Name == "" && portalKind == sessionKind:
				be.Send(&pgproto3.RowDescription{Fields: sourcesFields[2:]})
			case m.ObjectType == 'P' && portal && m.Name == "" && portalKind == setKind:
				be.Send(&pgproto3.NoData{})
			case m.ObjectType == 'P' && portal && m.Name == "" && portalKind == sourcesKind:
				be.Send(&pgproto3.RowDescription{Fields: sourcesFields})
			case m.ObjectType == 'P' && portal && m.Name == "" && portalKind == closingKind:
				be.Send(&pgproto3.RowDescription{Fields: ans.closingFields})
			case m.ObjectType == 'P' && portal && m.Name == "" && (portalKind == statusKind || portalKind == replicaStatusKind || portalKind == knownStatusKind):
				be.Send(&pgproto3.RowDescription{Fields: ans.statusFields})
			case m.ObjectType == 'P' && portal && m.Name == "":
				be.Send(&pgproto3.RowDescription{Fields: ans.fields})
			case m.ObjectType == 'S':
				fail("26000", fmt.Sprintf("prepared statement %q does not exist", m.Name))
			default:
				fail("34000", fmt.Sprintf("portal %q does not exist", m.Name))
			}
		case *pgproto3.Bind:
			switch {
			case !prepared[m.PreparedStatement]:
				fail("26000", fmt.Sprintf("prepared statement %q does not exist", m.PreparedStatement))
			case m.DestinationPortal != "" || len(m.Parameters) != len(params[kinds[m.PreparedStatement]]) || len(m.ParameterFormatCodes) > 1 ||
				(len(m.ParameterFormatCodes) == 1 && m.ParameterFormatCodes[0] != 0) ||
				len(m.ResultFormatCodes) > 1 || (len(m.ResultFormatCodes) == 1 && m.ResultFormatCodes[0] != 0):
				fail("0A000", "fakepg binds the unnamed portal, the statement's parameters in text, text results")
			default:
				portal, portalKind = true, kinds[m.PreparedStatement]
				if len(ans.senders) > 0 && len(m.Parameters) == 2 && (string(m.Parameters[0]) != bound[0] || string(m.Parameters[1]) != bound[1]) {
					// The senders' names as the server gives them for
					// what this probe says it knows (standbysSQL,
					// knownStandbysSQL).
					bound = [2]string{string(m.Parameters[0]), string(m.Parameters[1])}
					col := standbysJSON(ans.senders, m.Parameters, ans.row[fakeStartedColumn])
					for _, r := range []*[][]byte{&primaryRow, &primaryStatusRow} {
						*r = append([][]byte{}, *r...)
						(*r)[fakeStandbysColumn] = col
					}
					col = knownStandbysJSON(ans.senders, m.Parameters, ans.row[fakeStartedColumn])
					for _, r := range []*[][]byte{&knownRow, &knownStatusRow} {
						*r = append([][]byte{}, *r...)
						(*r)[fakeStandbysColumn] = col
					}
				}
				be.Send(&pgproto3.BindComplete{})
			}
		case *pgproto3.Execute:
			if !portal || m.Portal != "" {
				fail("34000", fmt.Sprintf("portal %q does not exist", m.Portal))
				continue
			}
			if portalKind == closingKind && ans.closingErr != nil {
				// A server in recovery: pg_current_wal_insert_lsn()
				// fails as the statement runs.
				be.Send(ans.closingErr)
				failed = true
				portal = false
				continue
			}
			if row := rows[portalKind]; row != nil {
				probesRun.Add(1)
				be.Send(&pgproto3.DataRow{Values: *row})
				be.Send(complete)
			} else if portalKind == setKind {
				be.Send(&pgproto3.CommandComplete{CommandTag: []byte("SET")})
			} else {
				be.Send(&pgproto3.CommandComplete{CommandTag: []byte("SELECT 0")}) // sourcesKind, sessionKind
			}
			portal = false // an unnamed portal runs to completion once
		case *pgproto3.Close:
			if m.ObjectType == 'S' {
				delete(prepared, m.Name)
			}
			be.Send(&pgproto3.CloseComplete{})
		case *pgproto3.Sync:
			failed, portal = false, false
			be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
			if be.Flush() != nil {
				return
			}
		case *pgproto3.Flush:
			if be.Flush() != nil {
				return
			}
		case *pgproto3.Terminate:
			return
		}
	}
}

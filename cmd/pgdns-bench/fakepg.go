package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"

	"github.com/jackc/pgx/v5/pgproto3"
)

// runFakePG serves n cheap fake PostgreSQL replicas, one per loopback
// address 127.1.x.y:5432: enough of the wire protocol to answer the probe's
// query with a replica's row (the real cluster's system identifier, a fixed
// replay position). They let the scale run configure 1,000 hosts on a
// machine that runs three real servers.
//
// Each fake is its own server run (its own postmaster start time), so that
// pgdns does not take them for one server listed many times.
func runFakePG(args []string) {
	fs := flag.NewFlagSet("fakepg", flag.ExitOnError)
	n := fs.Int("n", 997, "how many fake replicas")
	sysid := fs.String("sysid", "1", "system identifier to report")
	lsn := fs.String("lsn", "0/3000000", "replay position to report")
	_ = fs.Parse(args)
	for i := range *n {
		row := fakeRow(*sysid, *lsn, i)
		ln, err := net.Listen("tcp", FakeAddr(i))
		if err != nil {
			fmt.Fprintln(os.Stderr, "fakepg:", err)
			os.Exit(1)
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go serveFake(c, row)
			}
		}()
	}
	fmt.Println("ready")
	c := make(chan os.Signal, 1)
	signal.Notify(c, os.Interrupt)
	<-c
}

// FakeAddr is the address of fake replica i.
func FakeAddr(i int) string {
	return fmt.Sprintf("127.1.%d.%d:5432", i/250, i%250+1)
}

// fakeFields are the columns of the probe's query (probe/check.go).
var fakeFields = []pgproto3.FieldDescription{
	{Name: []byte("in_recovery"), DataTypeOID: 16, DataTypeSize: 1, TypeModifier: -1},
	{Name: []byte("insert"), DataTypeOID: 25, DataTypeSize: -1, TypeModifier: -1},
	{Name: []byte("receive"), DataTypeOID: 25, DataTypeSize: -1, TypeModifier: -1},
	{Name: []byte("replay"), DataTypeOID: 25, DataTypeSize: -1, TypeModifier: -1},
	{Name: []byte("timeline"), DataTypeOID: 20, DataTypeSize: 8, TypeModifier: -1},
	{Name: []byte("checkpoint_timeline"), DataTypeOID: 20, DataTypeSize: 8, TypeModifier: -1},
	{Name: []byte("sysid"), DataTypeOID: 25, DataTypeSize: -1, TypeModifier: -1},
	{Name: []byte("started"), DataTypeOID: 20, DataTypeSize: 8, TypeModifier: -1},
	{Name: []byte("standbys"), DataTypeOID: 25, DataTypeSize: -1, TypeModifier: -1},
	{Name: []byte("conninfo"), DataTypeOID: 25, DataTypeSize: -1, TypeModifier: -1},
	{Name: []byte("slot"), DataTypeOID: 25, DataTypeSize: -1, TypeModifier: -1},
	{Name: []byte("stats_visible"), DataTypeOID: 16, DataTypeSize: 1, TypeModifier: -1},
	{Name: []byte("sync_names_set"), DataTypeOID: 16, DataTypeSize: 1, TypeModifier: -1},
	{Name: []byte("wal_block_size"), DataTypeOID: 23, DataTypeSize: 4, TypeModifier: -1},
	{Name: []byte("wal_segment_size"), DataTypeOID: 20, DataTypeSize: 8, TypeModifier: -1},
	{Name: []byte("drain"), DataTypeOID: 25, DataTypeSize: -1, TypeModifier: -1},
	{Name: []byte("offline"), DataTypeOID: 25, DataTypeSize: -1, TypeModifier: -1},
}

// fakeRow is fake replica i's answer to the probe: streaming on timeline 1
// from a WAL receiver, at replay position lsn.
func fakeRow(sysid, lsn string, i int) [][]byte {
	started := fmt.Sprint(1_700_000_000_000_000 + i) // µs since the epoch, one per fake
	return [][]byte{[]byte("t"), []byte(""), []byte(lsn), []byte(lsn), []byte("1"), []byte("1"), []byte(sysid),
		[]byte(started), []byte("[]"), []byte("application_name=fake" + fmt.Sprint(i)), []byte(""),
		[]byte("t"), []byte("f"), []byte("8192"), []byte("16777216"), []byte(""), []byte("")}
}

func serveFake(c net.Conn, row [][]byte) {
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
	for k, v := range map[string]string{"server_version": "15.0", "client_encoding": "UTF8",
		"standard_conforming_strings": "on", "DateStyle": "ISO, MDY", "integer_datetimes": "on"} {
		be.Send(&pgproto3.ParameterStatus{Name: k, Value: v})
	}
	be.Send(&pgproto3.BackendKeyData{ProcessID: 1, SecretKey: []byte{0, 0, 0, 1}})
	be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	if be.Flush() != nil {
		return
	}
	for {
		msg, err := be.Receive()
		if err != nil {
			return
		}
		switch msg.(type) {
		case *pgproto3.Query:
			be.Send(&pgproto3.RowDescription{Fields: fakeFields})
			be.Send(&pgproto3.DataRow{Values: row})
			be.Send(&pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")})
			be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
			if be.Flush() != nil {
				return
			}
		case *pgproto3.Terminate:
			return
		}
	}
}

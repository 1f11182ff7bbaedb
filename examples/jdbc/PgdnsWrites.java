// PgdnsWrites writes rows through pgjdbc to the primary that pgdns names,
// reconnecting on failure, and prints which server took each write: a
// minimal JDBC client that follows a switchover. It creates its table,
// jdbc_writes, when the primary has none.
//
//   javac -cp /usr/share/java/postgresql.jar -d out PgdnsWrites.java
//   java -Djava.security.properties=pgdns.java.security \
//        -cp /usr/share/java/postgresql.jar:out PgdnsWrites \
//        'jdbc:postgresql://primary.db.local/postgres?targetServerType=primary&user=postgres' 60
//
// It stops after the given number of seconds (at most 600) or 100000
// writes, or when its standard input closes. Each line of output is one
// event, with the wall clock in milliseconds since the epoch:
//
//   cache ttl=1 negative=0            the JVM's DNS cache, in seconds
//   write <seq> <millis> <server>     a committed write and the server that took it
//   fail <millis> <message>           a connect or a write that failed
//   done <writes> <failures>
import java.security.Security;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;

public final class PgdnsWrites {
    private static final int MAX_WRITES = 100_000;
    private static final long PAUSE_MS = 20;
    private static volatile boolean stop;

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: PgdnsWrites JDBC-URL SECONDS");
            System.exit(2);
        }
        String url = args[0];
        long seconds = Math.min(Long.parseLong(args[1]), 600);
        // What the JVM will do with pgdns's TTL: read before the first lookup.
        System.out.printf("cache ttl=%s negative=%s%n",
                Security.getProperty("networkaddress.cache.ttl"),
                Security.getProperty("networkaddress.cache.negative.ttl"));
        System.out.flush();
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() >= 0) { }
            } catch (java.io.IOException ignored) { }
            stop = true;
        });
        stdin.setDaemon(true);
        stdin.start();

        long deadline = System.nanoTime() + seconds * 1_000_000_000L;
        Connection conn = null;
        int seq = 0, failures = 0;
        while (!stop && seq < MAX_WRITES && System.nanoTime() < deadline) {
            try {
                if (conn == null) {
                    // A new connection resolves the names again: with the
                    // cache at 1 s it follows pgdns's answer.
                    conn = DriverManager.getConnection(url);
                    // Its table, on whichever primary it reached (a
                    // promoted replica has it already). No key on seq:
                    // a second run counts from 1 again.
                    try (java.sql.Statement st = conn.createStatement()) {
                        st.execute("CREATE TABLE IF NOT EXISTS jdbc_writes (seq int NOT NULL, at timestamptz NOT NULL DEFAULT now())");
                    }
                }
                try (PreparedStatement st = conn.prepareStatement(
                        "INSERT INTO jdbc_writes (seq) VALUES (?) RETURNING host(inet_server_addr())")) {
                    st.setInt(1, seq + 1);
                    try (ResultSet rs = st.executeQuery()) {
                        rs.next();
                        seq++;
                        System.out.printf("write %d %d %s%n", seq, System.currentTimeMillis(), rs.getString(1));
                    }
                }
            } catch (SQLException e) {
                failures++;
                String msg = String.valueOf(e.getMessage()).replace('\n', ' ');
                System.out.printf("fail %d %s%n", System.currentTimeMillis(), msg);
                if (conn != null) {
                    // A broken connection is not reused: the next write
                    // connects again, through DNS.
                    try { conn.close(); } catch (SQLException ignored) { }
                    conn = null;
                }
            }
            System.out.flush();
            Thread.sleep(PAUSE_MS);
        }
        if (conn != null) {
            conn.close();
        }
        System.out.printf("done %d %d%n", seq, failures);
    }
}

import io.debezium.embedded.Connect;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.RecordChangeEvent;
import io.debezium.engine.format.ChangeEventFormat;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.connect.runtime.WorkerConfig;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.storage.MemoryOffsetBackingStore;

/**
 * make bench's Debezium peer: Debezium's embedded engine with its MariaDB connector reads the
 * binlog from a given position and counts the change records of one table until it has the
 * expected number, then prints {"rows": N, ...} as JSON. Records stay in Kafka Connect's form
 * (no JSON serialisation), the cheapest way to consume them.
 *
 * Arguments: host port user database table binlog-file binlog-position gtid-position (the GTID
 * position at that binlog position: MariaDB's connector resumes from it) expected-changes
 * (the password comes from MYSQL_PWD).
 */
public final class BenchDebezium {
    static final String ENGINE = "bench-debezium";
    static final String PREFIX = "bench";
    static final long IDLE_S = 60;

    /** Offsets held in memory, starting at the position given on the command line. */
    public static final class StartAt extends MemoryOffsetBackingStore {
        static volatile String file;
        static volatile long position;
        static volatile String gtids;

        @Override
        public void configure(WorkerConfig config) {
            super.configure(config);
            String key = "[\"" + ENGINE + "\",{\"server\":\"" + PREFIX + "\"}]";
            // MariaDB's connector resumes from the GTID position (the one at file:pos).
            String value = "{\"file\":\"" + file + "\",\"pos\":" + position + ",\"gtids\":\"" + gtids + "\"}";
            data.put(ByteBuffer.wrap(key.getBytes(StandardCharsets.UTF_8)),
                     ByteBuffer.wrap(value.getBytes(StandardCharsets.UTF_8)));
        }

        @Override
        public Set<Map<String, Object>> connectorPartitions(String connectorName) {
            return new HashSet<>();
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 9) {
            System.err.println("usage: BenchDebezium host port user database table binlog-file binlog-position "
                               + "gtid-position expected");
            System.exit(2);
        }
        String database = args[3];
        String table = args[4];
        StartAt.file = args[5];
        StartAt.position = Long.parseLong(args[6]);
        StartAt.gtids = args[7];
        long expected = Long.parseLong(args[8]);
        String topic = PREFIX + "." + database + "." + table;

        Properties props = new Properties();
        props.setProperty("name", ENGINE);
        props.setProperty("connector.class", "io.debezium.connector.mariadb.MariaDbConnector");
        props.setProperty("offset.storage", StartAt.class.getName());
        props.setProperty("offset.flush.interval.ms", "600000");
        props.setProperty("schema.history.internal", "io.debezium.relational.history.MemorySchemaHistory");
        // Offsets but no schema history: rebuild the history from the current schema (no rows
        // are read), then stream from the offset.
        props.setProperty("snapshot.mode", "recovery");
        props.setProperty("snapshot.locking.mode", "none");
        props.setProperty("database.hostname", args[0]);
        props.setProperty("database.port", args[1]);
        props.setProperty("database.user", args[2]);
        props.setProperty("database.password", System.getenv().getOrDefault("MYSQL_PWD", ""));
        props.setProperty("database.server.id", "5533");
        props.setProperty("topic.prefix", PREFIX);
        props.setProperty("database.include.list", database);
        props.setProperty("table.include.list", database + "." + table);
        props.setProperty("include.schema.changes", "false");
        props.setProperty("tombstones.on.delete", "false");

        AtomicLong changes = new AtomicLong();
        CountDownLatch done = new CountDownLatch(1);
        long started = System.nanoTime();
        long[] firstAt = {0};
        boolean[] failed = {false};
        DebeziumEngine<RecordChangeEvent<SourceRecord>> engine = DebeziumEngine.create(ChangeEventFormat.of(Connect.class))
            .using(props)
            .notifying((List<RecordChangeEvent<SourceRecord>> records,
                        DebeziumEngine.RecordCommitter<RecordChangeEvent<SourceRecord>> committer) -> {
                long seen = 0;
                for (RecordChangeEvent<SourceRecord> event : records) {
                    SourceRecord record = event.record();
                    if (topic.equals(record.topic()) && record.value() != null) {
                        seen++;
                    }
                    committer.markProcessed(event);
                }
                committer.markBatchFinished();
                if (seen > 0 && firstAt[0] == 0) {
                    firstAt[0] = System.nanoTime();
                }
                if (changes.addAndGet(seen) >= expected) {
                    done.countDown();
                }
            })
            .using((success, message, error) -> {
                if (!success) {
                    failed[0] = true;
                    System.err.println("debezium stopped: " + message);
                    for (Throwable cause = error; cause != null; cause = cause.getCause()) {
                        System.err.println("  caused by: " + cause);
                    }
                }
                done.countDown();
            })
            .build();
        ExecutorService executor = Executors.newSingleThreadExecutor();
        executor.execute(engine);
        // Stop when the count is reached, or when no record came for IDLE_S (a count that is
        // never reached must not hang the bench).
        long last = -1;
        long quietSince = System.nanoTime();
        while (!done.await(1, TimeUnit.SECONDS)) {
            long now = changes.get();
            if (now != last) {
                last = now;
                quietSince = System.nanoTime();
            } else if (System.nanoTime() - quietSince > IDLE_S * 1_000_000_000L) {
                System.err.println("no change record for " + IDLE_S + " s at " + now + " of " + expected);
                break;
            }
        }
        long ended = System.nanoTime();
        if (!failed[0]) {
            engine.close();
        }
        executor.shutdownNow();
        double firstToLast = firstAt[0] == 0 ? 0 : (ended - firstAt[0]) / 1e9;
        System.out.printf("{\"rows\": %d, \"expected\": %d, \"seconds_to_last\": %.3f, \"seconds_first_to_last\": %.3f, "
                          + "\"debezium_version\": \"%s\"}%n",
                          changes.get(), expected, (ended - started) / 1e9, firstToLast,
                          io.debezium.engine.DebeziumEngine.class.getPackage().getImplementationVersion());
        System.exit(changes.get() >= expected && !failed[0] ? 0 : 1);
    }
}

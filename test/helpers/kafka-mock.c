/*
 * kafka-mock: a real Kafka-protocol broker for tests, built on librdkafka's
 * mock cluster (rdkafka_mock.h). There is no Kafka package on the CI machine,
 * so test/helpers/kafka.ts compiles this file with `gcc ... -lrdkafka`.
 *
 * Usage: kafka-mock [BROKERS] [TOPIC:PARTITIONS ...]
 *   Prints "BOOTSTRAP host:port,..." once the brokers listen, then reads
 *   commands from stdin, one per line, answering "OK" or "ERR <reason>":
 *     topic NAME PARTITIONS   create a topic (the mock has no CreateTopics API)
 *     down BROKER_ID          close the broker's connections, refuse new ones
 *     up BROKER_ID            accept connections again
 *   Broker ids are 1..BROKERS; -1 means every broker. A topic given without
 *   ":PARTITIONS" gets one partition; unknown topics are auto-created on first
 *   metadata request with 4 partitions (the mock's default).
 *   Exits, destroying the cluster, on stdin EOF, SIGTERM or SIGINT. EOF also
 *   covers the parent dying, so a crashed test run leaves no broker behind.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

/* Set by the signal handler; fgets then fails with EINTR (no SA_RESTART). */
static volatile sig_atomic_t stopping = 0;

static void on_signal(int sig) {
        (void)sig;
        stopping = 1;
}

/* Replicas per partition: every broker up to three, like a small real cluster. */
static int replication_for(int brokers) {
        return brokers < 3 ? brokers : 3;
}

/* Creates NAME with PARTITIONS partitions; writes a reason into err on failure. */
static int create_topic(rd_kafka_mock_cluster_t *mc, int brokers,
                        const char *name, int partitions, char *err,
                        size_t errsize) {
        rd_kafka_resp_err_t rc;
        if (!*name || partitions < 1) {
                snprintf(err, errsize, "bad topic spec");
                return -1;
        }
        rc = rd_kafka_mock_topic_create(mc, name, partitions,
                                        replication_for(brokers));
        if (rc) {
                snprintf(err, errsize, "%s", rd_kafka_err2str(rc));
                return -1;
        }
        return 0;
}

/* Answers one command line; the reply goes to stdout, flushed. */
static void handle_command(rd_kafka_mock_cluster_t *mc, int brokers,
                           char *line) {
        char cmd[32], name[256], err[256];
        int num = 0;
        int n = sscanf(line, "%31s %255s %d", cmd, name, &num);
        rd_kafka_resp_err_t rc;

        if (n < 1) {
                return; /* blank line */
        }
        if (!strcmp(cmd, "topic") && n == 3) {
                if (create_topic(mc, brokers, name, num, err, sizeof(err)))
                        printf("ERR %s\n", err);
                else
                        printf("OK\n");
        } else if ((!strcmp(cmd, "down") || !strcmp(cmd, "up")) && n >= 2) {
                int id = atoi(name);
                if (id != -1 && (id < 1 || id > brokers)) {
                        printf("ERR no broker %s\n", name);
                } else {
                        rc = !strcmp(cmd, "down")
                                 ? rd_kafka_mock_broker_set_down(mc, id)
                                 : rd_kafka_mock_broker_set_up(mc, id);
                        if (rc)
                                printf("ERR %s\n", rd_kafka_err2str(rc));
                        else
                                printf("OK\n");
                }
        } else if (!strcmp(cmd, "produce-error") && n == 3) {
                /* The next Produce request (ApiKey 0) is answered with error `num`. */
                rd_kafka_mock_push_request_errors(mc, 0, 1, (rd_kafka_resp_err_t)num);
                printf("OK\n");
        } else {
                printf("ERR unknown command\n");
        }
        fflush(stdout);
}

int main(int argc, char **argv) {
        char errstr[512], line[1024];
        int brokers = 1, first_topic = 1, i;
        rd_kafka_conf_t *conf;
        rd_kafka_t *rk;
        rd_kafka_mock_cluster_t *mc;
        struct sigaction sa;

        /* Die with the parent even if its end of stdin is inherited elsewhere. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_signal;
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        signal(SIGPIPE, SIG_IGN);

        if (argc > 1 && !strchr(argv[1], ':')) {
                brokers = atoi(argv[1]);
                first_topic = 2;
        }
        if (brokers < 1) {
                fprintf(stderr, "kafka-mock: BROKERS must be >= 1\n");
                return 2;
        }

        /* The mock cluster needs a client handle to live in; it never connects. */
        conf = rd_kafka_conf_new();
        rd_kafka_conf_set(conf, "log.connection.close", "false", NULL, 0);
        /* Warnings and errors only: the "no bootstrap.servers" notice is noise. */
        rd_kafka_conf_set(conf, "log_level", "4", NULL, 0);
        rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
        if (!rk) {
                fprintf(stderr, "kafka-mock: rd_kafka_new: %s\n", errstr);
                return 1;
        }
        mc = rd_kafka_mock_cluster_new(rk, brokers);
        if (!mc) {
                fprintf(stderr, "kafka-mock: rd_kafka_mock_cluster_new failed\n");
                rd_kafka_destroy(rk);
                return 1;
        }

        for (i = first_topic; i < argc; i++) {
                char name[256];
                int partitions = 1;
                char *colon = strrchr(argv[i], ':');
                size_t len = colon ? (size_t)(colon - argv[i]) : strlen(argv[i]);
                if (len >= sizeof(name))
                        len = sizeof(name) - 1;
                memcpy(name, argv[i], len);
                name[len] = '\0';
                if (colon)
                        partitions = atoi(colon + 1);
                if (create_topic(mc, brokers, name, partitions, errstr,
                                 sizeof(errstr))) {
                        fprintf(stderr, "kafka-mock: topic %s: %s\n", argv[i],
                                errstr);
                        rd_kafka_mock_cluster_destroy(mc);
                        rd_kafka_destroy(rk);
                        return 1;
                }
        }

        printf("BOOTSTRAP %s\n", rd_kafka_mock_cluster_bootstraps(mc));
        fflush(stdout);

        while (!stopping && fgets(line, sizeof(line), stdin))
                handle_command(mc, brokers, line);
        if (ferror(stdin) && errno != EINTR)
                perror("kafka-mock: stdin");

        rd_kafka_mock_cluster_destroy(mc);
        rd_kafka_destroy(rk);
        return 0;
}

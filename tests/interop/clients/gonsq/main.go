// gonsq_client publishes or consumes with go-nsq, unchanged, and reports each acknowledged
// publish and each delivery as one JSON line on stdout, as the Python client scripts beside
// it do, so the interop tests read every client the same way.
//
//	gonsq_client produce --nsqd HOST:PORT --topic T --prefix P --count N [--mpub-batch B]
//	gonsq_client consume (--nsqd HOST:PORT | --lookupd HOST:PORT) --topic T --channel C
//	                     [--max-in-flight N] [--handle-seconds S] [--deadline S]
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/nsqio/go-nsq"
)

var stdout sync.Mutex

func emit(fields map[string]any) {
	line, err := json.Marshal(fields)
	if err != nil {
		log.Fatal(err)
	}
	stdout.Lock()
	defer stdout.Unlock()
	os.Stdout.Write(append(line, '\n'))
}

// filler and the body layout match bodies.py: "<id>|" then 0..255 bytes derived from the id.
func filler(ident []byte) []byte {
	digest := sha256.Sum256(ident)
	repeated := bytes.Repeat(digest[:], 8)
	return repeated[:digest[0]]
}

func makeBody(ident string) []byte {
	return append([]byte(ident+"|"), filler([]byte(ident))...)
}

func readBody(body []byte) (string, bool) {
	raw, rest, found := bytes.Cut(body, []byte("|"))
	return string(raw), found && bytes.Equal(rest, filler(raw))
}

func messageID(prefix string, index int) string {
	return fmt.Sprintf("%s-%06d", prefix, index)
}

func produce(args []string) int {
	flags := flag.NewFlagSet("produce", flag.ExitOnError)
	address := flags.String("nsqd", "", "host:port of nsqd's TCP listener")
	topic := flags.String("topic", "", "")
	prefix := flags.String("prefix", "", "")
	count := flags.Int("count", 0, "")
	batch := flags.Int("mpub-batch", 0, "0 publishes with PUB, n>0 with MPUB of n")
	flags.Parse(args)

	producer, err := nsq.NewProducer(*address, nsq.NewConfig())
	if err != nil {
		log.Print(err)
		return 2
	}
	producer.SetLogger(log.New(os.Stderr, "", log.LstdFlags), nsq.LogLevelWarning)
	defer producer.Stop()
	for next := 0; next < *count; {
		end := min(next+max(1, *batch), *count)
		ids := make([]string, 0, end-next)
		bodies := make([][]byte, 0, end-next)
		for i := next; i < end; i++ {
			ids = append(ids, messageID(*prefix, i))
			bodies = append(bodies, makeBody(ids[len(ids)-1]))
		}
		if *batch > 0 {
			err = producer.MultiPublish(*topic, bodies)
		} else {
			err = producer.Publish(*topic, bodies[0])
		}
		if err != nil {
			emit(map[string]any{"error": err.Error(), "ids": ids})
			return 1
		}
		for _, ident := range ids {
			emit(map[string]any{"acked": ident})
		}
		next = end
	}
	return 0
}

func consume(args []string) int {
	flags := flag.NewFlagSet("consume", flag.ExitOnError)
	address := flags.String("nsqd", "", "host:port of nsqd's TCP listener")
	lookupd := flags.String("lookupd", "", "host:port of nsqlookupd's HTTP listener, polled every second")
	topic := flags.String("topic", "", "")
	channel := flags.String("channel", "", "")
	maxInFlight := flags.Int("max-in-flight", 100, "")
	handleSeconds := flags.Float64("handle-seconds", 0, "time the handler takes per message")
	deadline := flags.Float64("deadline", 60, "seconds before it stops")
	flags.Parse(args)

	config := nsq.NewConfig()
	config.MaxInFlight = *maxInFlight
	config.MaxAttempts = 0
	config.LookupdPollInterval = time.Second
	consumer, err := nsq.NewConsumer(*topic, *channel, config)
	if err != nil {
		log.Print(err)
		return 2
	}
	consumer.SetLogger(log.New(os.Stderr, "", log.LstdFlags), nsq.LogLevelWarning)
	consumer.AddHandler(nsq.HandlerFunc(func(message *nsq.Message) error {
		ident, intact := readBody(message.Body)
		emit(map[string]any{"channel": *channel, "id": ident, "intact": intact,
			"attempts": message.Attempts, "msg_id": string(message.ID[:]),
			"t": float64(time.Now().UnixNano()) / 1e9})
		time.Sleep(time.Duration(*handleSeconds * float64(time.Second)))
		return nil // FIN
	}))
	if *lookupd != "" {
		err = consumer.ConnectToNSQLookupd(*lookupd)
	} else {
		err = consumer.ConnectToNSQD(*address)
	}
	if err != nil {
		log.Print(err)
		return 2
	}
	select {
	case <-consumer.StopChan:
	case <-time.After(time.Duration(*deadline * float64(time.Second))):
		consumer.Stop()
		<-consumer.StopChan
	}
	return 0
}

func main() {
	if len(os.Args) < 2 {
		log.Fatal("usage: gonsq_client produce|consume [flags]")
	}
	switch os.Args[1] {
	case "produce":
		os.Exit(produce(os.Args[2:]))
	case "consume":
		os.Exit(consume(os.Args[2:]))
	default:
		log.Fatalf("unknown command %q", os.Args[1])
	}
}

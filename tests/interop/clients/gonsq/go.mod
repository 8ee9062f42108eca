module nsq-operator/tests/interop/gonsq_client

go 1.22

require github.com/nsqio/go-nsq v1.1.0

require github.com/golang/snappy v0.0.1 // indirect

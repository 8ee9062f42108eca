"""nsq_client: an asyncio NSQ client with go-nsq's semantics."""

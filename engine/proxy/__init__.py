"""The gRPC access layer of RocketMQ 5 clients (apache.rocketmq.v2.MessagingService)."""

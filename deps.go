package swim
import (
 _ "github.com/vmihailenco/msgpack/v5"
 _ "go.uber.org/zap"
 _ "github.com/stretchr/testify/require"
 _ "go.uber.org/goleak"
)

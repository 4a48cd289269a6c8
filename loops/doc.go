// Package loops finds the cycles of event-loop threads in a server's trace: each cycle starts
// at a wait call (epoll_wait, poll, select, io_uring_enter, ... recorded by perflab record
// --waits), and the requests a thread received and the replies it sent until its next wait
// call are that cycle's N. From the cycles it gives the loop metrics of seed 003 (requests per
// cycle, busy and idle time, utilisation, loop-time percentiles, the wait/read/process/write
// phase table) and fits the batch model T = T_fixed + T_per_req·N per thread.
package loops

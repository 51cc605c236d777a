# A spawner that is not the Node process (issue 52: "going below Node's spawn floor needs a
# spawner that is not the Node process"): one resident perl reads a line per task on stdin
# ("id<TAB>cwd<TAB>log<TAB>command"), forks, starts `sh -c` in a session of its own with its
# output through a pipe, copies that pipe to the task's log (as a runner that caps the output
# must), and answers "S id pid" when it started and "E id status" when it was reaped. Only what
# the bench's floor needs: no cap, no time-out, no clean-up.
use strict;
use warnings;
use POSIX ();

my %kids;    # pid -> task id
my %outs;    # fileno -> [pipe, log]
pipe(my $sigr, my $sigw) or die "pipe: $!";
$SIG{CHLD} = sub { syswrite($sigw, 'x') };
my $in = '';
my $open = 1;

while ($open || %kids || %outs) {
  my $rin = '';
  vec($rin, fileno(STDIN), 1) = 1 if $open;
  vec($rin, fileno($sigr), 1) = 1;
  vec($rin, $_, 1) = 1 for keys %outs;
  # a SIGCHLD between the reap below and select is caught by the self-pipe; the timeout is a
  # second net only
  my $n = select(my $r = $rin, undef, undef, 0.1);
  while ((my $pid = waitpid(-1, POSIX::WNOHANG())) > 0) {
    my $id = delete $kids{$pid};
    syswrite(STDOUT, "E $id $?\n");
  }
  next unless $n && $n > 0;
  sysread($sigr, my $drained, 512) if vec($r, fileno($sigr), 1);
  for my $fd (keys %outs) {
    next unless vec($r, $fd, 1);
    my ($pipe, $log) = @{ $outs{$fd} };
    if (sysread($pipe, my $buf, 65536)) {
      syswrite($log, $buf);
    } else {
      close $pipe;
      close $log;
      delete $outs{$fd};
    }
  }
  next unless $open && vec($r, fileno(STDIN), 1);
  if (!sysread(STDIN, $in, 65536, length $in)) {
    $open = 0;
    next;
  }
  while ($in =~ s/^([^\n]*)\n//) {
    my ($id, $cwd, $path, $command) = split /\t/, $1, 4;
    pipe(my $rd, my $wr) or die "pipe: $!";
    my $pid = fork() // die "fork: $!";
    if ($pid == 0) {
      POSIX::setsid();
      chdir $cwd or POSIX::_exit(127);
      open(STDIN, '<', '/dev/null');
      open(STDOUT, '>&', $wr);
      open(STDERR, '>&', $wr);
      { exec { '/bin/sh' } '/bin/sh', '-c', $command; }
      POSIX::_exit(127);
    }
    close $wr;
    open(my $log, '>>', $path) or die "$path: $!";
    $outs{ fileno($rd) } = [ $rd, $log ];
    $kids{$pid} = $id;
    syswrite(STDOUT, "S $id $pid\n");
  }
}
